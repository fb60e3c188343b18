"""Emitters for shape and data-movement ops."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw, literal
from t2n.ir import Op
from t2n.ir.infer_utils import slice_dim

COMMON = EmitterTable("shape")
TRACT = EmitterTable("shape/tract")
KHRONOS = EmitterTable("shape/khronos")


@COMMON.emitter("reshape")
def reshape(ctx: EmitContext, op: Op) -> None:
    """The output type is explicit (ints and symbols), so no -1 or 0 reaches NNEF."""
    ctx.emit(op.output, "reshape", op.inputs[0], shape=list(op.output.type.shape))


@COMMON.emitter("transpose")
def transpose(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, "transpose", op.inputs[0], axes=list(op.attrs["perm"]))


@COMMON.emitter("squeeze", "unsqueeze")
def squeeze(ctx: EmitContext, op: Op) -> None:
    axes = list(op.attrs["axes"])
    if not axes:
        ctx.emit(op.output, "copy", op.inputs[0])
        return
    ctx.emit(op.output, op.kind, op.inputs[0], axes=axes)


@COMMON.emitter("concat")
def concat(ctx: EmitContext, op: Op) -> None:
    items = Raw("[" + ", ".join(ctx.arg(v) for v in op.inputs) + "]")
    ctx.emit(op.output, "concat", items, axis=op.attrs["axis"])


@COMMON.emitter("slice")
def slice_(ctx: EmitContext, op: Op) -> None:
    """Bounds normalized here: tract rejects negative begins and ends past the size."""
    x = op.inputs[0]
    begins = ctx.known(op.inputs[1], "slice begin")
    ends = ctx.known(op.inputs[2], "slice end")
    if begins is None or ends is None:
        return
    axes, b_out, e_out, strides = [], [], [], []
    for ax, b, e, s in zip(op.attrs["axes"], begins, ends, op.attrs["steps"]):
        bb, ee, length = slice_dim(x.type.shape[ax], b, e, int(s))
        if bb == 0 and ee == x.type.shape[ax] and s == 1:
            continue
        if isinstance(length, int) and length == 0:
            ctx.unsupported("an empty slice cannot be expressed")
            return
        axes.append(ax)
        b_out.append(bb)
        e_out.append(ee)
        strides.append(int(s))
    if not axes:
        ctx.emit(op.output, "copy", x)
        return
    stride = strides if any(s != 1 for s in strides) else None
    ctx.emit(op.output, "slice", x, axes=axes, begin=b_out, end=e_out, stride=stride)


@TRACT.emitter("expand")
def expand_tract(ctx: EmitContext, op: Op) -> None:
    x = op.inputs[0]
    if x.type.shape == op.output.type.shape:
        ctx.emit(op.output, "copy", x)
        return
    ctx.emit(op.output, "tract_core_broadcast", x, shape=list(op.output.type.shape))


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


@COMMON.emitter("tile")
def tile(ctx: EmitContext, op: Op) -> None:
    reps = ctx.known(op.inputs[1], "tile repeats")
    if reps is not None:
        ctx.emit(op.output, "tile", op.inputs[0], repeats=reps)


@TRACT.emitter("shape_of")
def shape_of_tract(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, "tract_core_cast", Raw(ctx.call("tract_core_shape_of", op.inputs[0])), to="i64")


_BORDER = {"constant": "constant", "reflect": "reflect"}


def _pad(ctx: EmitContext, op: Op, replicate: str) -> None:
    x = op.inputs[0]
    mode = op.attrs["mode"]
    pads = [tuple(int(p) for p in pair) for pair in op.attrs["pads"]]
    if mode == "circular":
        _circular(ctx, op, pads)
        return
    border = replicate if mode == "replicate" else _BORDER[mode]
    value = float(op.attrs.get("value", 0.0)) if x.type.dtype.is_float else int(op.attrs.get("value", 0))
    if mode == "constant":
        ctx.emit(op.output, "pad", x, padding=pads, border=border, value=value)
    else:
        ctx.emit(op.output, "pad", x, padding=pads, border=border)


def _circular(ctx: EmitContext, op: Op, pads: list[tuple[int, ...]]) -> None:
    """Circular padding as concat of the wrapped-around slices, one axis at a time."""
    cur = ctx.arg(op.inputs[0])
    shape = list(op.inputs[0].type.shape)
    for ax, (before, after) in enumerate(pads):
        if not before and not after:
            continue
        parts = []
        n = shape[ax]
        if before:
            parts.append(ctx.emit("circ_head", "slice", Raw(cur), axes=[ax], begin=[n - before], end=[n]))
        parts.append(cur)
        if after:
            parts.append(ctx.emit("circ_tail", "slice", Raw(cur), axes=[ax], begin=[0], end=[after]))
        cur = ctx.emit("circ", "concat", Raw("[" + ", ".join(parts) + "]"), axis=ax)
        shape[ax] = n + before + after
    ctx.emit(op.output, "copy", Raw(cur))


TRACT.add("pad", lambda ctx, op: _pad(ctx, op, "replicated"))
KHRONOS.add("pad", lambda ctx, op: _pad(ctx, op, "replicate"))


@TRACT.emitter("gather")
def gather_tract(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, "tract_core_gather", op.inputs[0], indices=Raw(ctx.arg(op.inputs[1])),
             axis=int(op.attrs["axis"]))


@KHRONOS.emitter("gather")
def gather_khronos(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, "gather", op.inputs[0], op.inputs[1], axis=int(op.attrs["axis"]))


@TRACT.emitter("range")
def range_tract(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, "tract_core_range", *op.inputs)


__all__ = ["literal"]
