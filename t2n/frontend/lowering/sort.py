"""Sorting (top-k), order statistics (median, kthvalue), cumulative ops and binary search.

Cumulative sums are one native op where the target has it (tract 0.23.9+:
``tract_core_cumsum``, linear and exact, any dtype), else triangular matmuls, in blocks of about sqrt(n) over long axes, when
sizes are static, else one ``cumsum_scan`` loop (linear in the length, the axis may be
dynamic); integers go through f64, exact below 2**53. Other
cumulative ops use a log-step prefix scan over a static axis: ``ceil(log2 n)`` shifted
combines.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from t2n.frontend.context import LoweringContext, Poison, host_array
from t2n.frontend.helpers import dim_value, i64, transpose, unsqueeze
from t2n.frontend.lowering.reduce import accumulated
from t2n.frontend.registry import RuleSet
from t2n.ir import DType, Value
from t2n.ir.ops.sort import WHOLE_AXIS

RULES = RuleSet("sort")


def _to_last(ctx: LoweringContext, x: Value, axis: int) -> tuple[Value, list[int]]:
    perm = [a for a in range(x.rank) if a != axis] + [axis]
    return transpose(ctx.b, x, perm), perm


def _back(ctx: LoweringContext, y: Value, perm: list[int]) -> Value:
    return transpose(ctx.b, y, [perm.index(i) for i in range(len(perm))])


def _identity(dtype: DType, how: str) -> float | int:
    if how == "add":
        return 0
    if how == "mul":
        return 1
    if dtype.is_float:
        return float("-inf") if how == "max" else float("inf")
    info = np.iinfo(dtype.numpy)
    return int(info.min if how == "max" else info.max)


def prefix_scan(ctx: LoweringContext, x: Value, axis: int, how: str) -> Value:
    """Inclusive scan with ``how`` (add/mul/max/min) along a static ``axis``."""
    n = x.type.shape[axis]
    if not isinstance(n, int):
        raise ctx.unsupported(f"a cumulative {how} of this dtype over a dynamic axis")
    b = ctx.b
    y, k = x, 1
    while k < n:
        pad_dims = list(x.type.shape)
        pad_dims[axis] = k
        fill = b.op("expand", ctx.as_value(_identity(x.type.dtype, how), x.type.dtype),
                    b.ints(pad_dims))
        head = b.op("slice", y, b.ints([0]), b.ints([n - k]), axes=(axis,), steps=(1,))
        y = b.op(how, y, b.op("concat", fill, head, axis=axis))
        k *= 2
    return y


BLOCKED_CUMSUM_FROM = 64
"""From this static length on, a cumulative sum is computed block by block."""


def _mask(ctx: LoweringContext, rows: int, dtype: DType, lead: int, strict_lower: bool) -> Value:
    """An upper-triangular (or strictly lower) matrix of ones, with ``lead`` unit axes."""
    m = np.tril(np.ones((rows, rows)), -1) if strict_lower else np.triu(np.ones((rows, rows)))
    return ctx.b.const(host_array(m.reshape((1,) * lead + m.shape), dtype), dtype)


def blocked_cumsum_last(ctx: LoweringContext, xt: Value, n: int) -> Value:
    """Cumulative sum along the last (static, length ``n``) axis of ``xt`` in blocks of
    about sqrt(n): a triangular matmul inside each block, then each block's offset (the
    totals of the blocks before it, one more small triangular matmul). About 2 n sqrt(n)
    products instead of n², and two small constant matrices instead of an n x n one
    (tract built and multiplied a 1000 x 1000 mask for a 1000-step sum)."""
    b, dtype = ctx.b, xt.type.dtype
    lead = list(xt.type.shape[:-1])
    block = math.isqrt(n - 1) + 1
    count = -(-n // block)
    if count * block > n:
        zeros = b.op("expand", ctx.as_value(0, dtype), b.ints([*lead, count * block - n]))
        xt = b.op("concat", xt, zeros, axis=len(lead))
    blocks = b.op("reshape", xt, b.ints([*lead, count, block]))
    within = b.op("matmul", blocks, _mask(ctx, block, dtype, len(lead), False),
                  transpose_a=False, transpose_b=False)
    totals = b.op("slice", within, b.ints([block - 1]), b.ints([block]), axes=(len(lead) + 1,), steps=(1,))
    offsets = b.op("matmul", _mask(ctx, count, dtype, len(lead), True), totals,
                   transpose_a=False, transpose_b=False)
    y = b.op("reshape", b.op("add", within, offsets), b.ints([*lead, count * block]))
    if count * block > n:
        y = b.op("slice", y, b.ints([0]), b.ints([n]), axes=(len(lead),), steps=(1,))
    return y


def cumsum_float(ctx: LoweringContext, x: Value, axis: int) -> Value:
    """Blocked triangular matmuls when the export has no dynamic axis (the fastest form
    in tract: one pass of small dense products), else a ``cumsum_scan`` loop from zeros
    shaped like one slice of ``x`` (read from its sizes, so a dynamic axis stays
    dynamic), linear in the length."""
    b = ctx.b
    if "cumsum" in ctx.lowering.native_ops:
        if x.type.dtype in (DType.F16, DType.BF16):  # PyTorch adds halves up in f32, rounding each sum once
            return b.cast(b.op("cumsum", b.cast(x, DType.F32), axis=axis), x.type.dtype)
        return b.op("cumsum", x, axis=axis)
    if ctx.lowering.static_sizes and all(isinstance(d, int) for d in x.type.shape):
        if x.rank == 1:  # the products need a row axis
            return b.op("squeeze", cumsum_float(ctx, b.op("unsqueeze", x, axes=(0,)), 1), axes=(0,))
        xt, perm = _to_last(ctx, x, axis)
        n = int(xt.type.shape[-1])
        if n >= BLOCKED_CUMSUM_FROM:
            return _back(ctx, blocked_cumsum_last(ctx, xt, n), perm)
        return _back(ctx, b.op("matmul", xt, _mask(ctx, n, x.type.dtype, 0, False),
                                transpose_a=False, transpose_b=False), perm)
    dims = [dim_value(b, x, a) for a in range(x.rank)]
    dims[axis] = i64(b, 1)
    zeros = b.op("expand", ctx.as_value(0, x.type.dtype), ctx.shape_tensor(dims))
    return b.op("cumsum_scan", x, zeros, axis=axis)


def _scan_input(ctx: LoweringContext) -> tuple[Value, int]:
    x = accumulated(ctx)
    if x.rank == 0:
        x = ctx.b.op("reshape", x, ctx.b.ints([1]))
    return x, ctx.axis(1, x.rank)


@RULES.rule("aten::cumsum", "aten::cumsum_")
def cumsum(ctx: LoweringContext) -> Value:
    """Integers are summed natively where the target can (exact, wrapping like PyTorch),
    else as f64 (exact below 2**53) by the same triangular matmul, so integer running
    sums (position ids, packed-sequence indices) follow dynamic axes."""
    x, axis = _scan_input(ctx)
    return running_sum(ctx, x, axis)


def running_sum(ctx: LoweringContext, x: Value, axis: int) -> Value:
    """The cumulative sum of ``x`` along ``axis`` in its own dtype: integers natively where
    the target sums them, else through f64 (exact below 2**53)."""
    if x.type.dtype.is_float or "cumsum" in ctx.lowering.native_ops:
        return cumsum_float(ctx, x, axis)
    wide = cumsum_float(ctx, ctx.b.cast(x, DType.F64), axis)
    return ctx.b.cast(wide, x.type.dtype)


@RULES.rule("aten::cumprod", "aten::cumprod_")
def cumprod(ctx: LoweringContext) -> Value:
    x, axis = _scan_input(ctx)
    return prefix_scan(ctx, x, axis, "mul")


@RULES.rule("aten::logcumsumexp")
def logcumsumexp(ctx: LoweringContext) -> Value:
    """max + log(cumsum(exp(x - max))) with the axis' (finite) maximum."""
    x = ctx.tensor(0)
    axis = ctx.axis(1, x.rank)
    b = ctx.b
    m = b.op("max_reduce", x, axes=(axis,), keepdims=True)
    m = b.op("select", b.op("is_inf", m), ctx.as_value(0.0, x.type.dtype), m)
    return b.op("add", b.op("log", cumsum_float(ctx, b.op("exp", b.op("sub", x, m)), axis)), m)


# -- top-k and sort --------------------------------------------------------------------
def topk_values(ctx: LoweringContext, x: Value, k: Any, axis: int, largest: bool) -> tuple[Value, Value]:
    if x.rank == 0:
        return x, ctx.as_value(0, DType.I64)
    if not isinstance(k, int):
        raise ctx.unsupported("top-k with k computed at run time")
    values, indices = ctx.b.multi("topk", x, axis=axis, k=k, largest=largest)
    return values, indices


def is_length_of(k: Any, x: Value, axis: int) -> bool:
    """Whether ``k`` is the traced length of ``x``'s ``axis`` (``x.shape[axis]``, read from
    ``x`` itself), so that it follows the axis when that is dynamic."""
    op = k.producer if isinstance(k, Value) else None
    if op is None or op.kind != "gather" or op.inputs[0].producer is None:
        return False
    shape_of, index = op.inputs[0].producer, op.inputs[1].producer
    if shape_of.kind != "shape_of" or shape_of.inputs[0] is not x or index is None or index.kind != "const":
        return False
    at = np.asarray(index.attrs["data"].array)
    return at.shape == () and int(at) % max(x.rank, 1) == axis


@RULES.rule("aten::topk")
def topk(ctx: LoweringContext) -> tuple[Value, Value]:
    """``k`` = the length of the sorted axis (``torch.topk(x, x.shape[d], d)``) is a sort of
    that axis, which stays one when the axis is dynamic."""
    x = ctx.tensor(0)
    axis = ctx.axis("dim", max(x.rank, 1)) if ctx.has("dim") else max(x.rank - 1, 0)
    largest = ctx.bool("largest") if ctx.has("largest") else True
    k = ctx.raw(1)
    return topk_values(ctx, x, WHOLE_AXIS if is_length_of(k, x, axis) else ctx.const(1), axis, largest)


def _sort_args(ctx: LoweringContext, x: Value) -> tuple[int, bool]:
    axis = ctx.axis("dim", max(x.rank, 1)) if ctx.has("dim") else max(x.rank - 1, 0)
    descending = ctx.bool("descending") if ctx.has("descending") else False
    return axis, descending


def sort_values(ctx: LoweringContext, x: Value, axis: int, descending: bool) -> tuple[Value, Value]:
    if x.rank == 0:
        return x, ctx.as_value(0, DType.I64)
    return topk_values(ctx, x, WHOLE_AXIS, axis, descending)


@RULES.rule("aten::sort")
def sort(ctx: LoweringContext) -> tuple[Value, Value]:
    x = ctx.tensor(0)
    return sort_values(ctx, x, *_sort_args(ctx, x))


@RULES.rule("aten::argsort")
def argsort(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    return sort_values(ctx, x, *_sort_args(ctx, x))[1]


@RULES.rule("aten::msort")
def msort(ctx: LoweringContext) -> Value:
    return sort_values(ctx, ctx.tensor(0), 0, False)[0]


# -- binary search -------------------------------------------------------------------------
def count_below(ctx: LoweringContext, seq: Value, values: Value, right: bool, out_int32: bool = False) -> Value:
    """For each value, how many sequence entries are < it (<= it with ``right``): its
    insertion index in the sorted sequence."""
    b = ctx.b
    if seq.rank == 1:
        v = unsqueeze(b, values, [values.rank])
        s = seq
    else:
        v = unsqueeze(b, values, [values.rank])
        s = unsqueeze(b, seq, [seq.rank - 1])
    hit = b.op("le" if right else "lt", s, v)
    out = b.op("sum_reduce", b.cast(hit, DType.I64), axes=(max(v.rank, s.rank) - 1,), keepdims=False)
    return b.cast(out, DType.I32) if out_int32 else out


@RULES.rule("aten::searchsorted")
def searchsorted(ctx: LoweringContext) -> Value:
    seq = ctx.tensor(0)
    values = ctx.tensor(1)
    if ctx.has("sorter") and not ctx.is_none("sorter"):
        raise ctx.unsupported("searchsorted with a sorter")
    right = ctx.bool("right") if ctx.has("right") else False
    if ctx.has("side") and not ctx.is_none("side"):
        right = ctx.const("side") == "right"
    dt = ctx.promote(seq, values)
    seq, values = ctx.b.cast(seq, dt), ctx.b.cast(values, dt)
    return count_below(ctx, seq, values, right, ctx.bool("out_int32") if ctx.has("out_int32") else False)


@RULES.rule("aten::bucketize")
def bucketize(ctx: LoweringContext) -> Value:
    values = ctx.tensor(0)
    bounds = ctx.tensor(1)
    dt = ctx.promote(values, bounds)
    values, bounds = ctx.b.cast(values, dt), ctx.b.cast(bounds, dt)
    right = ctx.bool("right") if ctx.has("right") else False
    return count_below(ctx, bounds, values, right, ctx.bool("out_int32") if ctx.has("out_int32") else False)


# -- order statistics --------------------------------------------------------------

def _order_statistic(ctx: LoweringContext, x: Value, axis: int, pick: int, keep: bool) -> tuple[Value, Value]:
    values, indices = sort_values(ctx, x, axis, False)
    b = ctx.b
    outs = []
    for v in (values, indices):
        s = b.op("slice", v, b.ints([pick]), b.ints([pick + 1]), axes=(axis,), steps=(1,))
        outs.append(s if keep else b.op("squeeze", s, axes=(axis,)))
    return outs[0], outs[1]


@RULES.rule("aten::median", "aten::nanmedian")
def median(ctx: LoweringContext) -> Value | tuple[Value, Value]:
    """The lower median (PyTorch's), from a sort along a static axis."""
    x = ctx.tensor(0)
    if ctx.kind == "aten::nanmedian" and x.type.dtype.is_float:
        raise ctx.unsupported("nanmedian (NaNs change which element is the median)")
    if ctx.n_inputs == 1:
        flat = ctx.b.op("reshape", x, ctx.b.ints([-1]))
        n = flat.type.shape[0]
        if not isinstance(n, int):
            raise ctx.unsupported("median over a dynamic size")
        return _order_statistic(ctx, flat, 0, (n - 1) // 2, False)[0]
    axis = ctx.axis(1, x.rank)
    n = x.type.shape[axis]
    if not isinstance(n, int):
        raise ctx.unsupported("median along a dynamic axis")
    return _order_statistic(ctx, x, axis, (n - 1) // 2, ctx.bool(2))


@RULES.rule("aten::kthvalue")
def kthvalue(ctx: LoweringContext) -> tuple[Value, Value]:
    x = ctx.tensor(0)
    axis = ctx.axis(2, x.rank) if ctx.n_inputs > 2 else x.rank - 1
    keep = ctx.bool(3) if ctx.n_inputs > 3 else False
    return _order_statistic(ctx, x, axis, ctx.int(1) - 1, keep)


@RULES.rule("aten::cummax", "aten::cummin")
def cummax(ctx: LoweringContext) -> tuple[Value, Poison]:
    x = ctx.tensor(0)
    how = "max" if "max" in ctx.kind else "min"
    values = prefix_scan(ctx, x, ctx.axis(1, x.rank), how)
    return values, Poison(f"the indices of cum{how} cannot be exported (only its values)")
