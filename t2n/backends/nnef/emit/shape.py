"""Emitters for shape and data-movement ops."""

from __future__ import annotations

import math

import numpy as np

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw, literal
from t2n.backends.nnef.emit.block_quant import gather_datum_type
from t2n.backends.nnef.versions import tract_has
from t2n.ir import DType, Op, Sym, Value
from t2n.ir.dims import Dim, is_data_symbol
from t2n.ir.infer_utils import slice_dim

COMMON = EmitterTable("shape")
TRACT = EmitterTable("shape/tract")
KHRONOS = EmitterTable("shape/khronos")


@COMMON.emitter("reshape")
def reshape(ctx: EmitContext, op: Op) -> None:
    """The output type is explicit (ints and symbols), so no -1 or 0 reaches NNEF. tract
    refuses ``shape = []``: a reshape to a scalar squeezes the unit axes instead."""
    x = op.inputs[0]
    if op.output.rank == 0:
        if x.rank == 0:
            ctx.emit(op.output, "copy", x)
        else:
            ctx.emit(op.output, "squeeze", x, axes=list(range(x.rank)))
        return
    shape = list(op.output.type.shape)
    data = [i for i, d in enumerate(shape) if _is_data_dim(d)]
    if data:
        # tract names a length computed from tensor data at run time only: it can keep
        # such an axis whole (written -1) but cannot split or merge it
        if len(data) > 1 or shape[data[0]] not in list(x.type.shape):
            ctx.unsupported("a reshape that splits or merges an axis whose length is computed "
                            "from tensor data (tract can only keep such an axis whole)")
            return
        shape[data[0]] = -1
    ctx.emit(op.output, "reshape", x, shape=shape)


def _is_data_dim(d: Dim) -> bool:
    """A length computed from tensor data (:func:`t2n.ir.dims.data_dim`)."""
    return isinstance(d, Sym) and any(is_data_symbol(s) for s in d.symbols())


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


@TRACT.emitter("slice")
def slice_tract(ctx: EmitContext, op: Op) -> None:
    """A strided slice along a static axis becomes slice → reshape to (L, step) → first
    column: tract 0.23.9 fails to load a strided slice (its Downsample) that it tries
    to move across a reshape of the same axis (window partitions, patch merging)."""
    x = op.inputs[0]
    steps = [int(st) for st in op.attrs["steps"]]
    begins = ctx.known(op.inputs[1], "slice begin")
    ends = ctx.known(op.inputs[2], "slice end")
    if begins is None or ends is None:
        return
    plan = [(ax, *slice_dim(x.type.shape[ax], b, e, st), st)
            for ax, b, e, st in zip(op.attrs["axes"], begins, ends, steps)]
    if not tract_has(ctx, SYMBOLIC_SLICE) and all(st == 1 for st in steps) and any(
            isinstance(x.type.shape[ax], int) and isinstance(ee, Sym) for ax, _, ee, _, _ in plan):
        _dyn_slices(ctx, op, plan)
        return
    if all(st == 1 for st in steps) or not all(
            isinstance(x.type.shape[ax], int) and isinstance(bb, int) and isinstance(n, int)
            for ax, bb, _, n, st in plan if st != 1):
        slice_(ctx, op)
        return
    cur: Value | Raw = x
    dims = list(x.type.shape)
    for ax, bb, ee, length, st in plan:
        if isinstance(length, int) and length == 0:
            ctx.unsupported("an empty slice cannot be expressed")
            return
        if st == 1:
            if not (bb == 0 and ee == dims[ax]):
                cur = Raw(ctx.emit(f"{op.output.name}_s", "slice", cur, axes=[ax], begin=[bb], end=[ee]))
                dims[ax] = length
            continue
        n = dims[ax]
        assert isinstance(n, int) and isinstance(bb, int) and isinstance(length, int)
        # whole windows of `st` elements, then (when the last window would run past the
        # end) the last element on its own: no padding, so any dtype works
        whole = length if bb + length * st <= n else length - 1
        parts: list[str] = []
        if whole:
            seg = ctx.emit(f"{op.output.name}_s", "slice", cur, axes=[ax], begin=[bb], end=[bb + whole * st])
            grid = ctx.emit(f"{op.output.name}_g", "reshape", Raw(seg),
                            shape=dims[:ax] + [whole, st] + dims[ax + 1:])
            first = ctx.emit(f"{op.output.name}_f", "slice", Raw(grid), axes=[ax + 1], begin=[0], end=[1])
            parts.append(ctx.emit(f"{op.output.name}_q", "squeeze", Raw(first), axes=[ax + 1]))
        if whole < length:
            at = bb + whole * st
            parts.append(ctx.emit(f"{op.output.name}_l", "slice", cur, axes=[ax], begin=[at], end=[at + 1]))
        cur = Raw(parts[0]) if len(parts) == 1 else Raw(ctx.emit(
            f"{op.output.name}_c", "concat", Raw("[" + ", ".join(parts) + "]"), axis=ax))
        dims[ax] = length
    ctx.emit(op.output, "copy", cur)


SYMBOLIC_SLICE = "slice of a static axis to a symbolic end"


def _dyn_slices(ctx: EmitContext, op: Op, plan: list[tuple[int, Dim, Dim, Dim, int]]) -> None:
    """tract before 0.23 types ``slice(x, end = [S])`` of a 64-long axis as min(S, 64),
    which it cannot equate with S (reshapes then fail, at load or once S is set):
    ``tract_core_dyn_slice`` takes the length as given."""
    cur: Value | Raw = op.inputs[0]
    dims = list(op.inputs[0].type.shape)
    for ax, bb, ee, length, _ in plan:
        if bb == 0 and ee == dims[ax]:
            continue
        bounds = [Raw(ctx.call("tract_core_cast", Raw(literal(d)), to="i64")) for d in (bb, ee)]
        cur = Raw(ctx.emit(f"{op.output.name}_s", "tract_core_dyn_slice", cur, *bounds,
                           axis=ax, len=Raw(literal(length))))
        dims[ax] = length
    ctx.emit(op.output, "copy", cur)


@TRACT.emitter("expand")
def expand_tract(ctx: EmitContext, op: Op) -> None:
    x = op.inputs[0]
    if x.type.shape == op.output.type.shape:
        ctx.emit(op.output, "copy", x)
        return
    src = ctx.arg(x)
    if ctx.is_const(x) and x.rank == 0 and x.type.dtype.is_float and x.type.dtype is not DType.F32:
        # A float literal is f32 in tract: say which float type the filled tensor has.
        src = ctx.call("tract_core_cast", Raw(src), to=x.type.dtype.value)
    ctx.emit(op.output, "tract_core_broadcast", Raw(src), shape=list(op.output.type.shape))


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


def _pad_attrs(op: Op, replicate: str) -> dict[str, object]:
    mode = op.attrs["mode"]
    if mode != "constant":
        return {"border": replicate if mode == "replicate" else _BORDER[mode]}
    value = op.attrs.get("value", 0)
    dtype = op.inputs[0].type.dtype
    fill = float(value) if dtype.is_float else (bool(value) if dtype is DType.BOOL else int(value))
    return {"border": "constant", "value": fill}


def _pairs(op: Op) -> list[tuple[int, int]]:
    return [(int(p[0]), int(p[1])) for p in op.attrs["pads"]]


def _pad_tract(ctx: EmitContext, op: Op) -> None:
    if op.attrs["mode"] == "circular":
        _circular(ctx, op, _pairs(op))
        return
    ctx.emit(op.output, "pad", op.inputs[0], padding=_pairs(op), **_pad_attrs(op, "replicated"))


def _interpreter_pads(pads: list[tuple[int, int]]) -> bool:
    """The forms the Khronos reference interpreter implements: rank 3 to 5, and the
    first two axes (or the first and the last) not padded."""
    return 3 <= len(pads) <= 5 and pads[0] == (0, 0) and (pads[1] == (0, 0) or pads[-1] == (0, 0))


def _pad_khronos(ctx: EmitContext, op: Op) -> None:
    """Padding other axes goes one axis at a time through a [before, 1, n, after] view
    (shapes are static in Khronos NNEF), which every consumer runs."""
    pads = _pairs(op)
    if op.attrs["mode"] == "circular":
        _circular(ctx, op, pads)
        return
    attrs = _pad_attrs(op, "replicate")
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


def _circular(ctx: EmitContext, op: Op, pads: list[tuple[int, int]]) -> None:
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


TRACT.add("pad", _pad_tract)
KHRONOS.add("pad", _pad_khronos)


@TRACT.emitter("gather")
def gather_tract(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, "tract_core_gather", op.inputs[0], indices=Raw(ctx.arg(op.inputs[1])),
             axis=int(op.attrs["axis"]), datum_type=gather_datum_type(ctx, op))


@KHRONOS.emitter("gather")
def gather_khronos(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, "gather", op.inputs[0], op.inputs[1], axis=int(op.attrs["axis"]))


@TRACT.emitter("reverse")
def reverse_tract(ctx: EmitContext, op: Op) -> None:
    """``tract_core_downsample`` with stride -1 reverses an axis and keeps a symbolic size
    (a negative-stride ``slice`` makes tract abort)."""
    cur = ctx.arg(op.inputs[0])
    axes = list(op.attrs["axes"])
    if not axes:
        ctx.emit(op.output, "copy", Raw(cur))
    for i, ax in enumerate(axes):
        out = op.output if i == len(axes) - 1 else "reversed"
        cur = ctx.emit(out, "tract_core_downsample", Raw(cur), axis=int(ax), stride=-1, modulo=0)


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


SYMBOLIC_RANGE = "range of i64 bounds sliced to its symbolic length"


@TRACT.emitter("range")
def range_tract(ctx: EmitContext, op: Op) -> None:
    """A range whose length is a size expression (``arange(x.size(1))``) is sliced to
    ``[0:S]``: tract gives a range's length a fresh symbol, and without the slice it
    cannot tell that ``S``-long tensors and the range agree (reshapes then fail). The
    range itself stays i64: a TDim range makes tract 0.23.9 rewrite causal masks into
    slices it cannot evaluate."""
    known = [v.known for v in op.inputs]
    if op.output.type.dtype.is_int and all(k is not None and np.asarray(k).ndim == 0 for k in known):
        bounds = [np.asarray(k).item() for k in known]
        if any(isinstance(d, Sym) for d in bounds) and not tract_has(ctx, SYMBOLIC_RANGE):
            # before 0.23 a range of TDim literals has the length S itself
            ctx.emit(op.output, "tract_core_cast", Raw(ctx.call("tract_core_range", *[Raw(literal(d)) for d in bounds])),
                     to=op.output.type.dtype.value)
            return
        if any(isinstance(d, Sym) for d in bounds):
            dt = op.output.type.dtype.value
            r = ctx.emit(f"{op.output.name}_free", "tract_core_range",
                         *[Raw(ctx.call("tract_core_cast", Raw(literal(d)), to=dt)) for d in bounds])
            ctx.emit(op.output, "slice", Raw(r), axes=[0], begin=[0], end=[op.output.type.shape[0]])
            return
    ctx.emit(op.output, "tract_core_range", *op.inputs)


__all__ = ["literal"]
