"""Khronos NNEF's emitters of the shape family (the forms both targets share are in
:mod:`t2n.backends.nnef.emit.shape`)."""

from __future__ import annotations

import math

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.backends.nnef.emit.shape import circular_pad, pad_attrs, pad_pairs
from t2n.ir import Op

KHRONOS = EmitterTable("shape/khronos")


@KHRONOS.emitter("expand")
def expand_khronos(ctx: EmitContext, op: Op) -> None:
    """No broadcast op in Khronos: unsqueeze to the output rank, then tile the unit axes."""
    x = op.inputs[0]
    out = list(op.output.type.shape)
    lead = len(out) - x.rank
    src = ctx.arg(x)
    if lead:
        src = ctx.emit("expand_rank", "unsqueeze", x, axes=list(range(lead)))
    full = [1] * lead + list(x.type.shape)
    reps = [o if f == 1 else 1 for f, o in zip(full, out)]
    if all(r == 1 for r in reps):
        ctx.emit(op.output, "copy", Raw(src))
    else:
        ctx.emit(op.output, "tile", Raw(src), repeats=reps)


def _interpreter_pads(pads: list[tuple[int, int]]) -> bool:
    """The forms the Khronos reference interpreter implements: rank 3 to 5, and the
    first two axes (or the first and the last) not padded."""
    return 3 <= len(pads) <= 5 and pads[0] == (0, 0) and (pads[1] == (0, 0) or pads[-1] == (0, 0))


def _pad_khronos(ctx: EmitContext, op: Op) -> None:
    """Padding other axes goes one axis at a time through a [before, 1, n, after] view
    (shapes are static in Khronos NNEF), which every consumer runs."""
    pads = pad_pairs(op)
    if op.attrs["mode"] == "circular":
        circular_pad(ctx, op, pads)
        return
    attrs = pad_attrs(op, "replicate")
    x = op.inputs[0]
    if _interpreter_pads(pads):
        ctx.emit(op.output, "pad", x, padding=pads, **attrs)
        return
    cur = ctx.arg(x)
    shape = [int(d) for d in x.type.shape]
    for ax, (before, after) in enumerate(pads):
        if not before and not after:
            continue
        outer, inner = math.prod(shape[:ax]), math.prod(shape[ax + 1:])
        view = ctx.emit("pad_view", "reshape", Raw(cur), shape=[outer, 1, shape[ax], inner])
        grown = ctx.emit("pad_axis", "pad", Raw(view), padding=[(0, 0), (0, 0), (before, after), (0, 0)],
                         **attrs)
        shape[ax] += before + after
        cur = ctx.emit("padded", "reshape", Raw(grown), shape=list(shape))
    ctx.emit(op.output, "copy", Raw(cur))


KHRONOS.add("pad", _pad_khronos)


@KHRONOS.emitter("gather")
def gather_khronos(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, "gather", op.inputs[0], op.inputs[1], axis=int(op.attrs["axis"]))


@KHRONOS.emitter("reverse")
def reverse_khronos(ctx: EmitContext, op: Op) -> None:
    """A stride -1 slice from the last element to just before the first (begin -1,
    end -(n + 1): negative bounds count from the end)."""
    x = op.inputs[0]
    axes = [int(a) for a in op.attrs["axes"]]
    if not axes:
        ctx.emit(op.output, "copy", x)
        return
    ends = [-(x.type.shape[a] + 1) for a in axes]
    ctx.emit(op.output, "slice", x, axes=axes, begin=[-1] * len(axes), end=ends, stride=[-1] * len(axes))

