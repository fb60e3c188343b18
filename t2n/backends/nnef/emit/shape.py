"""Emitters for shape and data-movement ops."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw, literal
from t2n.ir import DType, Op, Sym
from t2n.ir.dims import Dim, is_data_symbol
from t2n.ir.infer_utils import slice_dim

COMMON = EmitterTable("shape")


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


@COMMON.emitter("tile")
def tile(ctx: EmitContext, op: Op) -> None:
    reps = ctx.known(op.inputs[1], "tile repeats")
    if reps is not None:
        ctx.emit(op.output, "tile", op.inputs[0], repeats=reps)


_BORDER = {"constant": "constant", "reflect": "reflect"}


def pad_attrs(op: Op, replicate: str) -> dict[str, object]:
    mode = op.attrs["mode"]
    if mode != "constant":
        return {"border": replicate if mode == "replicate" else _BORDER[mode]}
    value = op.attrs.get("value", 0)
    dtype = op.inputs[0].type.dtype
    fill = float(value) if dtype.is_float else (bool(value) if dtype is DType.BOOL else int(value))
    return {"border": "constant", "value": fill}


def pad_pairs(op: Op) -> list[tuple[int, int]]:
    return [(int(p[0]), int(p[1])) for p in op.attrs["pads"]]


def circular_pad(ctx: EmitContext, op: Op, pads: list[tuple[int, int]]) -> None:
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


__all__ = ["literal"]

