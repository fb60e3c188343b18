"""Binary arithmetic aten ops with PyTorch's type promotion: add/sub/mul/div, the
rounding divisions and remainders, powers, atan2, hypot, copysign, xlogy, extrema."""

from __future__ import annotations

import math
from typing import Any

from t2n.frontend.context import LoweringContext
from t2n.frontend.lowering.elementwise import (
    const,
    keep_self_dtype,
    may_be_nan,
)
from t2n.frontend.registry import RuleSet
from t2n.ir import DType, Value

RULES = RuleSet("arithmetic")


# -- binary arithmetic -------------------------------------------------------------------

def _scaled(ctx: LoweringContext, other: Any, alpha: Any) -> Any:
    if alpha is None or (not isinstance(alpha, Value) and alpha == 1):
        return other
    if isinstance(other, Value) or isinstance(alpha, Value):
        o, a = ctx.promoted(other, alpha)
        return ctx.b.op("mul", o, a)
    return other * alpha


@RULES.rule("aten::add", "aten::add_", "aten::sub", "aten::sub_", "aten::subtract",
            "aten::subtract_", "aten::rsub")
def add_sub(ctx: LoweringContext) -> Value:
    """self ± alpha * other (rsub: other - alpha * self); bool + bool is or."""
    a, b = ctx.raw(0), ctx.raw(1)
    alpha = ctx.raw("alpha") if ctx.has("alpha") else None
    if ctx.kind == "aten::rsub":
        a, b = b, a
    out_dtype = ctx.promote(a, b)
    is_add = ctx.kind.startswith("aten::add")
    if out_dtype is DType.BOOL and is_add:
        x, y = ctx.promoted(a, b)
        return keep_self_dtype(ctx, ctx.b.op("or", x, y))
    b = _scaled(ctx, b, alpha)
    x, y = ctx.promoted(a, b, dtype=out_dtype)
    return keep_self_dtype(ctx, ctx.b.op("add" if is_add else "sub", x, y))


@RULES.rule("aten::mul", "aten::mul_", "aten::multiply", "aten::multiply_")
def mul(ctx: LoweringContext) -> Value:
    a, b = ctx.raw(0), ctx.raw(1)
    dt = ctx.promote(a, b)
    x, y = ctx.promoted(a, b, dtype=dt)
    return keep_self_dtype(ctx, ctx.b.op("and" if dt is DType.BOOL else "mul", x, y))


def divide(ctx: LoweringContext, a: Any, b: Any, mode: str | None) -> Value:
    """PyTorch's division: true division (integers promote to f32), or rounded
    toward zero ('trunc') or toward -inf ('floor'), in the promoted dtype."""
    dt = ctx.promote(a, b)
    if mode is None:
        x, y = ctx.promoted(a, b, dtype=dt if dt.is_float else DType.F32)
        return ctx.b.op("div", x, y)
    x, y = ctx.promoted(a, b, dtype=dt)
    q = ctx.b.op("div", x, y)
    if mode == "trunc":
        return ctx.b.op("trunc", q) if dt.is_float else q
    if mode != "floor":
        raise ctx.unsupported(f"rounding_mode={mode!r}")
    if dt.is_float:
        return ctx.b.op("floor", q)
    # one op (not truncation and a fix-up): sizes such as `x.size(1) // 2` stay known
    # expressions under dynamic axes
    return ctx.b.op("floor_div", x, y)


@RULES.rule("aten::div", "aten::div_", "aten::true_divide", "aten::true_divide_",
            "aten::divide", "aten::divide_")
def div(ctx: LoweringContext) -> Value:
    mode = ctx.const("rounding_mode") if ctx.has("rounding_mode") else None
    return keep_self_dtype(ctx, divide(ctx, ctx.raw(0), ctx.raw(1), mode))


@RULES.rule("aten::floor_divide", "aten::floor_divide_")
def floor_divide(ctx: LoweringContext) -> Value:
    return keep_self_dtype(ctx, divide(ctx, ctx.raw(0), ctx.raw(1), "floor"))


@RULES.rule("aten::remainder", "aten::remainder_", "aten::fmod", "aten::fmod_")
def remainder(ctx: LoweringContext) -> Value:
    """fmod: a - trunc(a / b) * b, the sign of a (C). remainder: the sign of b (Python):
    a - floor(a / b) * b."""
    a, b = ctx.raw(0), ctx.raw(1)
    dt = ctx.promote(a, b)
    x, y = ctx.promoted(a, b, dtype=dt)
    if dt.is_int and "fmod" not in ctx.kind:  # x - floor(x / y) * y: sizes stay known (S % 4)
        return keep_self_dtype(ctx, ctx.b.op("sub", x, ctx.b.op("mul", ctx.b.op("floor_div", x, y), y)))
    q = ctx.b.op("div", x, y)
    if dt.is_float:
        q = ctx.b.op("trunc" if "fmod" in ctx.kind else "floor", q)
    return keep_self_dtype(ctx, ctx.b.op("sub", x, ctx.b.op("mul", q, y)))


@RULES.rule("aten::pow", "aten::pow_")
def pow_(ctx: LoweringContext) -> Value:
    """Tensor ** tensor, tensor ** scalar and scalar ** tensor (``2 ** x``). Common
    constant exponents become cheaper ops. Integer powers stay integers (a negative
    integer exponent is not supported by tract)."""
    a, b = ctx.raw(0), ctx.raw(1)
    dt = ctx.promote(a, b)
    if isinstance(a, Value) and not isinstance(b, Value):
        x = ctx.as_value(a, dt)
        if b == 1:
            return keep_self_dtype(ctx, x)
        if b == 2:
            return keep_self_dtype(ctx, ctx.b.op("square", x))
        special = {0.5: "sqrt", -0.5: "rsqrt", -1: "rcp"}.get(b)
        if special is not None and dt.is_float:
            return keep_self_dtype(ctx, ctx.b.op(special, x))
    x, y = ctx.promoted(a, b, dtype=dt)
    return keep_self_dtype(ctx, ctx.b.op("pow", x, y))


@RULES.rule("aten::float_power", "aten::float_power_")
def float_power(ctx: LoweringContext) -> Value:
    """Always in f64, as PyTorch does."""
    x, y = ctx.promoted(ctx.raw(0), ctx.raw(1), dtype=DType.F64)
    return keep_self_dtype(ctx, ctx.b.op("pow", x, y))


def _float_pair(ctx: LoweringContext) -> tuple[Value, Value]:
    a, b = ctx.raw(0), ctx.raw(1)
    dt = ctx.promote(a, b)
    x, y = ctx.promoted(a, b, dtype=dt if dt.is_float else DType.F32)
    return x, y


@RULES.rule("aten::atan2", "aten::atan2_", "aten::arctan2", "aten::arctan2_")
def atan2(ctx: LoweringContext) -> Value:
    y, x = _float_pair(ctx)
    return keep_self_dtype(ctx, ctx.b.op("atan2", y, x))


@RULES.rule("aten::hypot", "aten::hypot_")
def hypot(ctx: LoweringContext) -> Value:
    x, y = _float_pair(ctx)
    s = ctx.b.op("add", ctx.b.op("square", x), ctx.b.op("square", y))
    return keep_self_dtype(ctx, ctx.b.op("sqrt", s))


@RULES.rule("aten::copysign", "aten::copysign_")
def copysign(ctx: LoweringContext) -> Value:
    """|a| with b's sign; -0.0 counts as negative (1 / -0.0 is -inf)."""
    other = ctx.raw(1)
    x, y = _float_pair(ctx)
    mag = ctx.b.op("abs", x)
    if not isinstance(other, Value):
        negative = math.copysign(1.0, float(other)) < 0
        return keep_self_dtype(ctx, ctx.b.op("neg", mag) if negative else mag)
    zero = const(ctx.b, 0.0, y)
    neg = ctx.b.op("or", ctx.b.op("lt", y, zero), ctx.b.op("lt", ctx.b.op("rcp", y), zero))
    return keep_self_dtype(ctx, ctx.b.op("select", neg, ctx.b.op("neg", mag), mag))


@RULES.rule("aten::xlogy", "aten::xlogy_", "aten::special_xlogy")
def xlogy(ctx: LoweringContext) -> Value:
    """x * log(y), 0 where x is 0, NaN where y is NaN."""
    x, y = _float_pair(ctx)
    prod = ctx.b.op("mul", x, ctx.b.op("log", y))
    out = ctx.b.op("select", ctx.b.op("eq", x, const(ctx.b, 0.0, x)), const(ctx.b, 0.0, x), prod)
    if may_be_nan(y):
        out = ctx.b.op("select", ctx.b.op("is_nan", y), y, out)
    return keep_self_dtype(ctx, out)


@RULES.rule("aten::maximum", "aten::minimum", "aten::fmax", "aten::fmin")
def extremum(ctx: LoweringContext) -> Value:
    """maximum/minimum propagate NaN, fmax/fmin ignore it (NaN only if both are):
    ``max``/``min`` alone do either, depending on the engine, so NaNs are selected
    explicitly (only for operands that may hold one)."""
    a, b = ctx.raw(0), ctx.raw(1)
    dt = ctx.promote(a, b)
    x, y = ctx.promoted(a, b, dtype=dt)
    is_max = "max" in ctx.kind
    if dt is DType.BOOL:
        return ctx.b.op("or" if is_max else "and", x, y)
    m = ctx.b.op("max" if is_max else "min", x, y)
    ignore = ctx.kind.startswith("aten::fm")
    for nan_side, other in ((y, x), (x, y)):
        if may_be_nan(nan_side):
            m = ctx.b.op("select", ctx.b.op("is_nan", nan_side), other if ignore else nan_side, m)
    return m


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
