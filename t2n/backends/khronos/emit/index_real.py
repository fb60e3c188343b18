"""Khronos NNEF: integer index arithmetic computed on reals, and element-wise gathers.

Standard NNEF defines arithmetic and comparisons on ``scalar`` (real) tensors only, but
PyTorch's integer indexing needs a little arithmetic on its indices: a negative index
counts from the end (``select(i < 0, i + n, i)``), several indices merge into one
(``i * n + j``). Where an integer value serves only as gather indices (every use leads,
through such arithmetic, selects and reshapes, to the indices of a ``gather``), its
arithmetic is written on reals: ``cast<scalar>`` of the operands, the standard op, and
``cast<integer>`` back. Valid indices are smaller than the tensor they index, so this
is exact as long as that is below 2^24 elements (f32 holds every integer up to it);
a larger tensor keeps the refusal. Integer arithmetic with any other use is refused as
before (see ``khronos_type_problems``).

``gather_elements`` (``torch.gather``) becomes a standard ``gather`` from the input
flattened to one axis, at flat positions computed the same way: the index times the
gathered axis' stride, plus a constant offset per other axis.
"""

from __future__ import annotations

import math

import numpy as np

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.ir import ArrayData, DType, Graph, Op, Value

KHRONOS = EmitterTable("index_real/khronos")

REAL_EXACT = 2 ** 24
"""Integers below this are exact in f32, the interpreter's ``scalar``."""

INDEX_SINKS = {"gather": 1, "gather_elements": 1}
"""Ops and the operand that takes indices."""

ARITHMETIC = ("add", "sub", "mul", "neg", "min", "max")
"""Integer ops written as the same op on reals (``div`` and ``abs`` have emitters below)."""
COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")
_THROUGH = frozenset([*ARITHMETIC, *COMPARISONS, "div", "floor_div", "abs", "and", "or", "xor", "not", "select", "cast", "reshape", "unsqueeze", "squeeze",
                      "expand", "concat", "transpose", "slice", "identity"])
"""Ops an index value may pass through on its way to a gather's indices."""


def index_only(graph: Graph, v: Value, _memo: dict[int, bool] | None = None) -> bool:
    """Whether every use of ``v`` ends, through index arithmetic, in the indices of a
    gather of fewer than 2^24 elements along the gathered axes (never in an output)."""
    memo = {} if _memo is None else _memo
    key = id(v)
    if key in memo:
        return memo[key]
    memo[key] = False  # while deciding (the graph has no cycles; this only guards)
    ok = not graph.is_output(v) and bool(v.uses)
    for op, slot in v.uses:
        if not ok:
            break
        if op.kind in INDEX_SINKS:
            ok = slot == INDEX_SINKS[op.kind] and _gathered_size(op) < REAL_EXACT
        elif op.kind in _THROUGH:
            out = op.output
            ok = (out.type.dtype.is_int or out.type.dtype is DType.BOOL) and index_only(graph, out, memo)
        else:
            ok = False
    memo[key] = ok
    return ok


def _gathered_size(op: Op) -> float:
    x = op.inputs[0]
    dims = [x.type.shape[op.attrs["axis"]]] if op.kind == "gather" else list(x.type.shape)
    return math.prod(d if isinstance(d, int) else math.inf for d in dims)


def real_operand(ctx: EmitContext, v: Value, rank: int) -> Raw:
    """``v`` as a real operand of a broadcasting op of output rank ``rank``."""
    data = ctx.const_data(v)
    if data is not None and data.ndim == 0 and data.dtype != object:
        return Raw(f"{float(data.item())!r}")
    text = ctx.arg_at_rank(v, rank)
    if v.type.dtype.is_float:
        return Raw(text)
    if v.type.dtype is DType.BOOL:
        return Raw(ctx.call("select", Raw(text), 1.0, 0.0))
    # a generic invocation is a statement of its own: nested, `cast<scalar>(x)` would
    # parse as the comparisons `cast < scalar > (x)`
    return Raw(ctx.emit(f"{v.name}_real", "cast<scalar>", Raw(text)))


def _int_operands(op: Op) -> bool:
    return any(v.type.dtype.is_int for v in op.inputs)


def _arithmetic(name: str):  # type: ignore[no-untyped-def]
    def emit(ctx: EmitContext, op: Op) -> None:
        rank = op.output.rank
        if not _int_operands(op):
            ctx.emit(op.output, name, *[Raw(ctx.arg_at_rank(v, rank)) for v in op.inputs])
            return
        args = [real_operand(ctx, v, rank) for v in op.inputs]
        ctx.emit(op.output, "cast<integer>", Raw(ctx.call(name, *args)))

    return emit


def _comparison(name: str):  # type: ignore[no-untyped-def]
    def emit(ctx: EmitContext, op: Op) -> None:
        rank = op.output.rank
        if _int_operands(op):
            ctx.emit(op.output, name, *[real_operand(ctx, v, rank) for v in op.inputs])
        else:
            ctx.emit(op.output, name, *[Raw(ctx.arg_at_rank(v, rank)) for v in op.inputs])

    return emit


for _name in ARITHMETIC:
    KHRONOS.add(_name, _arithmetic(_name))


@KHRONOS.emitter("div")
def div_khronos(ctx: EmitContext, op: Op) -> None:
    """Integer division truncates toward zero: the real quotient rounded toward zero."""
    rank = op.output.rank
    if not _int_operands(op):
        ctx.emit(op.output, "div", *[Raw(ctx.arg_at_rank(v, rank)) for v in op.inputs])
        return
    q = Raw(ctx.emit(f"{op.output.name}_quotient", "div", *[real_operand(ctx, v, rank) for v in op.inputs]))
    up, down = Raw(ctx.call("ceil", q)), Raw(ctx.call("floor", q))
    ctx.emit(op.output, "cast<integer>", Raw(ctx.emit(f"{op.output.name}_trunc", "select",
                                                      Raw(ctx.call("lt", q, 0.0)), up, down)))


@KHRONOS.emitter("floor_div")
def floor_div_khronos(ctx: EmitContext, op: Op) -> None:
    """The real quotient rounded toward -inf (integers: cast back)."""
    rank = op.output.rank
    args = [real_operand(ctx, v, rank) for v in op.inputs]
    q = Raw(ctx.emit(f"{op.output.name}_floor", "floor", Raw(ctx.call("div", *args))))
    if op.output.type.dtype.is_int:
        ctx.emit(op.output, "cast<integer>", q)
    else:
        ctx.emit(op.output, "copy", q)


@KHRONOS.emitter("abs")
def abs_khronos(ctx: EmitContext, op: Op) -> None:
    x = op.inputs[0]
    if not x.type.dtype.is_int:
        ctx.emit(op.output, "abs", x)
        return
    ctx.emit(op.output, "cast<integer>", Raw(ctx.call("abs", real_operand(ctx, x, x.rank))))
for _name in COMPARISONS:
    KHRONOS.add(_name, _comparison(_name))


@KHRONOS.emitter("gather_elements")
def gather_elements_khronos(ctx: EmitContext, op: Op) -> None:
    """``out[p] = x[p with axis a replaced by idx[p]]`` as a gather from ``x`` flattened,
    at ``idx * stride_a + sum_k p_k * stride_k`` (a constant per other axis)."""
    x, idx = op.inputs
    axis = int(op.attrs["axis"])
    if not (x.type.shape.is_static and idx.type.shape.is_static):
        ctx.unsupported("a gather along an axis of a tensor with symbolic sizes")
        return
    xs, ids = [int(d) for d in x.type.shape], [int(d) for d in idx.type.shape]
    numel = math.prod(xs)
    if numel >= REAL_EXACT:
        ctx.unsupported(f"torch.gather from a tensor of {numel} elements: its flat positions are "
                        "computed on reals, exact below 2^24 elements")
        return
    strides = [math.prod(xs[k + 1:]) for k in range(len(xs))]
    rank = len(ids)
    flat = Raw(ctx.call("mul", real_operand(ctx, idx, rank), float(strides[axis])))
    for k in range(rank):
        if k == axis or ids[k] == 1:
            continue
        shape = [1] * rank
        shape[k] = ids[k]
        offsets = (np.arange(ids[k], dtype=np.float32) * strides[k]).reshape(shape)
        name = ctx.fresh(f"{op.output.name}_offsets")
        ctx.variable_line(name, ArrayData(offsets, DType.F32), f"constants/{name}", DType.F32)
        flat = Raw(ctx.call("add", flat, Raw(name)))
    positions = ctx.emit(f"{op.output.name}_positions", "cast<integer>", flat)
    flat_x = ctx.emit(f"{op.output.name}_flat", "reshape", x, shape=[numel])
    ctx.emit(op.output, "gather", Raw(flat_x), Raw(positions), axis=0)
