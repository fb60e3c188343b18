"""tract's emitters of the shape family (the forms both targets share are in
:mod:`t2n.backends.nnef.emit.shape`)."""

from __future__ import annotations

import numpy as np

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw, literal
from t2n.backends.nnef.emit.shape import circular_pad, pad_attrs, pad_pairs, slice_
from t2n.backends.tract.emit.block_quant import gather_datum_type
from t2n.backends.tract.versions import tract_has
from t2n.ir import DType, Op, Sym, Trait, Value
from t2n.ir.dims import Dim
from t2n.ir.infer_utils import slice_dim

TRACT = EmitterTable("shape/tract")


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
        assert isinstance(bb, int) and isinstance(length, int)
        cur = _strided_axis(ctx, op, cur, dims, ax, bb, length, st)
        dims[ax] = length
    ctx.emit(op.output, "copy", cur)


def _strided_axis(ctx: EmitContext, op: Op, cur: Value | Raw, dims: list[Dim], ax: int, bb: int,
                  length: int, st: int) -> Raw:
    """Every ``st``-th element of static axis ``ax`` from ``bb`` without a strided slice:
    whole windows of ``st`` elements reshaped to (windows, st) and their first column,
    then (when the last window would run past the end) the last element on its own: no
    padding, so any dtype works."""
    n = dims[ax]
    assert isinstance(n, int)
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
    return Raw(parts[0]) if len(parts) == 1 else Raw(ctx.emit(
        f"{op.output.name}_c", "concat", Raw("[" + ", ".join(parts) + "]"), axis=ax))


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
    if not ctx.is_const(x) and _read_by_a_product(ctx, op.output, _widened_axes(op)):
        _expand_by_gather(ctx, op, src)
        return
    ctx.emit(op.output, "tract_core_broadcast", Raw(src), shape=list(op.output.type.shape))


def _widened_axes(op: Op) -> set[int]:
    """The axes of ``expand``'s output that the broadcast widens (new leading axes too)."""
    dims, out = list(op.inputs[0].type.shape), list(op.output.type.shape)
    lead = len(out) - len(dims)
    return {i for i, m in enumerate(out)
            if not (isinstance(m, int) and m == 1) and (i < lead or (isinstance(dims[i - lead], int)
                                                                      and dims[i - lead] == 1))}


def _read_by_a_product(ctx: EmitContext, v: Value, widened: set[int]) -> bool:
    """Whether a matrix product reads ``v`` broadcast along one of its two matrix axes,
    directly or through concatenations and element-wise ops. tract 0.23.9 folds such a
    broadcast into the product and gets it wrong: along the summed axis, wrong numbers;
    along the other, a model it cannot load ("Trying to substitute a 16,32 by 1,32":
    DPT's readout projection of the CLS token concatenated to every patch). A broadcast
    along batch axes (grouped-query attention's repeated heads) it folds right, but not
    one reshaped into a linear layer's rows (SVD's image embedding repeated per frame:
    the weight has no such axis, and tract cannot load the model either way)."""
    seen: set[int] = set()
    todo: list[tuple[Value, set[int], bool]] = [(v, widened, False)]
    while todo:
        cur, axes, reshaped = todo.pop()
        for user in ctx.graph.users(cur):
            if "matmul" in user.kind:
                if cur in user.inputs[:2] and (axes & {cur.rank - 2, cur.rank - 1} or (
                        reshaped and min(i.rank for i in user.inputs[:2]) < cur.rank)):
                    return True
            elif id(user) in seen:
                continue
            elif user.kind in ("concat", "cast", "copy") or user.has(Trait.ELEMENTWISE):
                seen.add(id(user))
                todo.extend((out, {a + out.rank - cur.rank for a in axes}, reshaped) for out in user.outputs)
            elif user.kind == "reshape":  # the widened axes' places are lost: only the rank test
                seen.add(id(user))
                todo.append((user.output, set(), True))
    return False


def _expand_by_gather(ctx: EmitContext, op: Op, src: str) -> None:
    """The broadcast as gathers of element 0 along each axis it widens: a copy tract does
    not fold into a matrix product."""
    x, out = op.inputs[0], op.output.type.shape
    lead = len(out) - x.rank
    cur = ctx.call("unsqueeze", Raw(src), axes=list(range(lead))) if lead else src
    dims = [1] * lead + list(x.type.shape)
    for axis, (n, m) in enumerate(zip(dims, out)):
        if isinstance(n, int) and n == 1 and not (isinstance(m, int) and m == 1):
            zeros = ctx.call("tract_core_broadcast", Raw("0"), shape=[m])
            cur = ctx.emit(f"{op.output.name}_g", "tract_core_gather", Raw(cur), indices=Raw(zeros), axis=axis)
    ctx.emit(op.output, "copy", Raw(cur))


@TRACT.emitter("shape_of")
def shape_of_tract(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, "tract_core_cast", Raw(ctx.call("tract_core_shape_of", op.inputs[0])), to="i64")


def _pad_tract(ctx: EmitContext, op: Op) -> None:
    if op.attrs["mode"] == "circular":
        circular_pad(ctx, op, pad_pairs(op))
        return
    attrs = pad_attrs(op, "replicated")
    if op.inputs[0].type.dtype is DType.BOOL:  # tract's pad cannot run on bool: padded as u8
        attrs = {**attrs, "value": int(bool(attrs["value"]))} if "value" in attrs else attrs
        as_bytes = ctx.call("tract_core_cast", op.inputs[0], to="u8")
        ctx.emit(op.output, "tract_core_cast", Raw(ctx.call("pad", Raw(as_bytes), padding=pad_pairs(op), **attrs)),
                 to="bool")
        return
    ctx.emit(op.output, "pad", op.inputs[0], padding=pad_pairs(op), **attrs)


TRACT.add("pad", _pad_tract)


@TRACT.emitter("gather")
def gather_tract(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, "tract_core_gather", op.inputs[0], indices=Raw(ctx.arg(op.inputs[1])),
             axis=int(op.attrs["axis"]), datum_type=gather_datum_type(ctx, op))


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

