"""Reductions and softmax."""

from __future__ import annotations

from t2n.frontend.context import LoweringContext, norm_axis
from t2n.frontend.registry import RuleSet
from t2n.ir import DType, Value

RULES = RuleSet("reduce")


def reduce_axes(ctx: LoweringContext, x: Value, key: int | str = 1) -> tuple[int, ...]:
    if not ctx.has(key) or ctx.is_none(key):
        return tuple(range(x.rank))
    dims = ctx.ints(key)
    if not dims:
        return tuple(range(x.rank))
    return tuple(sorted({norm_axis(d, x.rank) for d in dims}))


def _keepdim(ctx: LoweringContext) -> bool:
    return ctx.bool("keepdim") if ctx.has("keepdim") else False


@RULES.rule("aten::mean")
def mean(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    dt = ctx.dtype_arg("dtype") if ctx.has("dtype") else None
    if dt is not None:
        x = ctx.b.cast(x, dt)
    if x.rank == 0:
        return x
    return ctx.b.op("mean_reduce", x, axes=reduce_axes(ctx, x), keepdims=_keepdim(ctx))


@RULES.rule("aten::sum")
def sum_(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    dt = ctx.dtype_arg("dtype") if ctx.has("dtype") else None
    if dt is None and not x.type.dtype.is_float:
        dt = DType.I64
    if dt is not None:
        x = ctx.b.cast(x, dt)
    if x.rank == 0:
        return x
    return ctx.b.op("sum_reduce", x, axes=reduce_axes(ctx, x), keepdims=_keepdim(ctx))


@RULES.rule("aten::softmax", "aten::_softmax", "aten::log_softmax", "aten::_log_softmax")
def softmax(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    dt = None
    if ctx.has("dtype") and not ctx.is_none("dtype"):
        dt = ctx.dtype_arg("dtype")
    elif ctx.kind.startswith("aten::_") and ctx.bool(2):
        dt = DType.F32  # half_to_float
    if dt is not None:
        x = ctx.b.cast(x, dt)
    if not x.type.dtype.is_float:
        x = ctx.b.cast(x, DType.F32)
    if x.rank == 0:
        return x
    axis = ctx.axis(1, x.rank)
    kind = "log_softmax" if "log" in ctx.kind else "softmax"
    return ctx.b.op(kind, x, axes=(axis,))


@RULES.rule("aten::prod")
def prod(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    dt = ctx.dtype_arg("dtype") if ctx.has("dtype") else None
    if dt is None and not x.type.dtype.is_float:
        dt = DType.I64
    if dt is not None:
        x = ctx.b.cast(x, dt)
    if x.rank == 0:
        return x
    axes = (ctx.axis("dim", x.rank),) if ctx.has("dim") and not ctx.is_none("dim") else tuple(range(x.rank))
    return ctx.b.op("prod_reduce", x, axes=axes, keepdims=_keepdim(ctx))
