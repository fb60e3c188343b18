"""Less common ops user code calls directly: log-add-exp, Heaviside, sign bits, sliding
windows (``Tensor.unfold``), rotations, order statistics, traces, grids."""

from __future__ import annotations

from typing import Any

import numpy as np

from t2n.frontend.context import LoweringContext, Poison
from t2n.frontend.helpers import transpose
from t2n.frontend.lowering.index import take_diagonal
from t2n.frontend.lowering.sort import prefix_scan, sort_values
from t2n.frontend.registry import RuleSet
from t2n.ir import Dim, DType, Value

RULES = RuleSet("extra")


def _float_pair(ctx: LoweringContext) -> tuple[Value, Value]:
    a, b = ctx.promoted(ctx.raw(0), ctx.raw(1))
    if not a.type.dtype.is_float:
        a, b = ctx.b.cast(a, DType.F32), ctx.b.cast(b, DType.F32)
    return a, b


@RULES.rule("aten::logaddexp", "aten::logaddexp2")
def logaddexp(ctx: LoweringContext) -> Value:
    """max(a, b) + log(1 + exp(-|a - b|)) (base 2 for logaddexp2): no overflow."""
    a, b = _float_pair(ctx)
    bb = ctx.b
    m = bb.op("max", a, b)
    gap = bb.op("neg", bb.op("abs", bb.op("sub", a, b)))
    if ctx.kind.endswith("2"):
        one = ctx.as_value(1.0, a.type.dtype)
        two = ctx.as_value(2.0, a.type.dtype)
        return bb.op("add", m, bb.op("log2", bb.op("add", one, bb.op("pow", two, gap))))
    return bb.op("add", m, bb.op("log1p", bb.op("exp", gap)))


@RULES.rule("aten::heaviside", "aten::heaviside_")
def heaviside(ctx: LoweringContext) -> Value:
    x, values = ctx.promoted(ctx.raw(0), ctx.raw(1))
    b = ctx.b
    zero, one = ctx.as_value(0, x.type.dtype), ctx.as_value(1, x.type.dtype)
    step = b.op("select", b.op("gt", x, zero), one, zero)
    return b.op("select", b.op("eq", x, zero), values, step)


@RULES.rule("aten::signbit")
def signbit(ctx: LoweringContext) -> Value:
    """x < 0, and -0.0 counts as negative (1 / -0.0 = -inf)."""
    x = ctx.tensor(0)
    b = ctx.b
    if not x.type.dtype.is_float:
        return b.op("lt", x, ctx.as_value(0, x.type.dtype))
    zero = ctx.as_value(0.0, x.type.dtype)
    negative_zero = b.op("and", b.op("eq", x, zero), b.op("lt", b.op("rcp", x), zero))
    return b.op("or", b.op("lt", x, zero), negative_zero)


@RULES.rule("aten::unfold")
def unfold(ctx: LoweringContext) -> Value:
    """``x.unfold(dim, size, step)``: windows gathered with constant indices; the window
    axis goes last, as in PyTorch."""
    x = ctx.tensor(0)
    b = ctx.b
    if x.rank == 0:
        return b.op("reshape", x, b.ints([1]))
    axis, size, step = ctx.axis(1, x.rank), ctx.int(2), ctx.int(3)
    n = x.type.shape[axis]
    if not isinstance(n, int):
        raise ctx.unsupported("sliding windows over a dynamic axis")
    count = (n - size) // step + 1
    idx = np.arange(count)[:, None] * step + np.arange(size)[None, :]
    g = b.op("gather", x, b.const(idx.astype(np.int64), DType.I64), axis=axis)
    perm = list(range(axis + 1)) + list(range(axis + 2, x.rank + 1)) + [axis + 1]
    return transpose(b, g, perm)


@RULES.rule("aten::rot90")
def rot90(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    k = ctx.int(1) % 4 if ctx.n_inputs > 1 else 1
    dims = ctx.ints(2) if ctx.n_inputs > 2 else [0, 1]
    d0, d1 = (d % x.rank for d in dims)
    b = ctx.b
    perm = list(range(x.rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    if k == 1:
        return transpose(b, b.op("reverse", x, axes=(d1,)), perm)
    if k == 2:
        return b.op("reverse", x, axes=tuple(sorted((d0, d1))))
    if k == 3:
        return b.op("reverse", transpose(b, x, perm), axes=(d1,))
    return x


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


@RULES.rule("aten::trace")
def trace(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    d = take_diagonal(ctx, x, 0, 0, 1)
    if not x.type.dtype.is_float:
        d = ctx.b.cast(d, DType.I64)
    return ctx.b.op("sum_reduce", d, axes=(0,), keepdims=False)


@RULES.rule("aten::cummax", "aten::cummin")
def cummax(ctx: LoweringContext) -> tuple[Value, Poison]:
    x = ctx.tensor(0)
    how = "max" if "max" in ctx.kind else "min"
    values = prefix_scan(ctx, x, ctx.axis(1, x.rank), how)
    return values, Poison(f"the indices of cum{how} cannot be exported (only its values)")


@RULES.rule("aten::meshgrid")
def meshgrid(ctx: LoweringContext) -> list[Value]:
    raw: Any = ctx.raw(0)
    items = [ctx.as_value(v) for v in raw]
    indexing = ctx.const(1) if ctx.n_inputs > 1 and not ctx.is_none(1) else "ij"
    b = ctx.b
    sizes = [v.type.shape[0] if v.rank else 1 for v in items]
    order = list(range(len(items)))
    if indexing == "xy" and len(items) >= 2:
        order[0], order[1] = 1, 0
    shape = [sizes[i] for i in order]
    outs = []
    for k, v in enumerate(items):
        pos = order.index(k)
        dims: list[Dim] = [1] * len(items)
        dims[pos] = sizes[k]
        outs.append(b.op("expand", b.op("reshape", v, b.ints(dims)), b.ints(shape)))
    return outs


@RULES.rule("aten::triu_indices", "aten::tril_indices")
def tri_indices(ctx: LoweringContext) -> Value:
    rows, cols = ctx.int(0), ctx.int(1)
    offset = ctx.int(2) if ctx.n_inputs > 2 else 0
    fn = np.triu_indices if "triu" in ctx.kind else np.tril_indices
    idx = np.stack(fn(rows, offset, cols)).astype(np.int64)
    return ctx.b.const(idx, DType.I64)


@RULES.rule("aten::softmin")
def softmin(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    if not x.type.dtype.is_float:
        x = ctx.b.cast(x, DType.F32)
    return ctx.b.op("softmax", ctx.b.op("neg", x), axes=(ctx.axis(1, x.rank),))


@RULES.rule("aten::hsplit", "aten::vsplit", "aten::dsplit")
def hvd_split(ctx: LoweringContext) -> list[Value]:
    """numpy-style splits: even sections (which must divide the axis) or indices."""
    from t2n.frontend.lowering.shape import cut

    x = ctx.tensor(0)
    kind = ctx.kind.removeprefix("aten::")
    axis = {"vsplit": 0, "hsplit": 1 if x.rank > 1 else 0, "dsplit": 2}[kind]
    n = x.type.shape[axis]
    spec = ctx.const(1)
    if isinstance(spec, (list, tuple)):
        return cut(ctx.b, x, axis, [0, *[int(i) for i in spec]])
    if not isinstance(n, int) or n % int(spec):
        raise ctx.unsupported(f"{kind} into {spec} sections of a dynamic or non-divisible axis")
    step = n // int(spec)
    return cut(ctx.b, x, axis, list(range(0, n, step)))


@RULES.rule("aten::broadcast_tensors")
def broadcast_tensors(ctx: LoweringContext) -> list[Value]:
    """Each tensor expanded to the common broadcast shape (sizes as traced; under dynamic
    axes the baked-size check reports a size that should have followed a symbol)."""
    from t2n.ir.infer_utils import broadcast_shapes

    raw: Any = ctx.raw(0)
    items = [ctx.as_value(v) for v in raw]
    shape = list(broadcast_shapes(*[v.type.shape for v in items]))
    return [v if list(v.type.shape) == shape else ctx.b.op("expand", v, ctx.b.ints(shape)) for v in items]


@RULES.rule("aten::isclose")
def isclose(ctx: LoweringContext) -> Value:
    """|a - b| <= atol + rtol * |b|, equal values (infinities included) always close."""
    a, b_ = ctx.promoted(ctx.raw(0), ctx.raw(1))
    rtol = ctx.float(2) if ctx.n_inputs > 2 else 1e-5
    atol = ctx.float(3) if ctx.n_inputs > 3 else 1e-8
    equal_nan = ctx.bool(4) if ctx.n_inputs > 4 else False
    b = ctx.b
    if not a.type.dtype.is_float:
        a, b_ = b.cast(a, DType.F64), b.cast(b_, DType.F64)
    dt = a.type.dtype
    bound = b.op("add", ctx.as_value(atol, dt), b.op("mul", ctx.as_value(rtol, dt), b.op("abs", b_)))
    close = b.op("or", b.op("eq", a, b_), b.op("le", b.op("abs", b.op("sub", a, b_)), bound))
    if equal_nan:
        close = b.op("or", close, b.op("and", b.op("is_nan", a), b.op("is_nan", b_)))
    return close
