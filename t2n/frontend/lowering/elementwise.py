"""Element-wise aten ops: unary math and activations, binary arithmetic with
PyTorch's type promotion."""

from __future__ import annotations

from typing import Any

from t2n.frontend.context import LoweringContext
from t2n.frontend.registry import RuleSet
from t2n.ir import DType, Value

RULES = RuleSet("elementwise")

FLOAT_UNARY = {
    "exp": "exp", "log": "log", "log2": "log2", "sqrt": "sqrt", "rsqrt": "rsqrt",
    "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan",
    "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "asinh": "asinh", "acosh": "acosh",
    "atanh": "atanh", "sigmoid": "sigmoid", "erf": "erf", "reciprocal": "rcp", "silu": "silu",
    "arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh",
    "arccosh": "acosh", "arctanh": "atanh", "hardswish": "hard_swish",
}
"""aten name → IR op for unary ops that compute in floating point (ints are promoted)."""

SAME_TYPE_UNARY = {"neg": "neg", "abs": "abs", "relu": "relu", "floor": "floor", "ceil": "ceil",
                   "negative": "neg", "absolute": "abs"}
"""aten name → IR op for unary ops that keep the input dtype."""


def _float_unary(ir_op: str):  # type: ignore[no-untyped-def]
    def rule(ctx: LoweringContext) -> Value:
        x = ctx.tensor(0)
        if not x.type.dtype.is_float:
            x = ctx.b.cast(x, DType.F32)
        return ctx.b.op(ir_op, x)

    return rule


def _same_unary(ir_op: str):  # type: ignore[no-untyped-def]
    def rule(ctx: LoweringContext) -> Value:
        x = ctx.tensor(0)
        if ir_op in ("floor", "ceil") and not x.type.dtype.is_float:
            return x
        return ctx.b.op(ir_op, x)

    return rule


for _name, _ir in FLOAT_UNARY.items():
    RULES.add(f"aten::{_name}", _float_unary(_ir))
    RULES.add(f"aten::{_name}_", _float_unary(_ir))
for _name, _ir in SAME_TYPE_UNARY.items():
    RULES.add(f"aten::{_name}", _same_unary(_ir))
    RULES.add(f"aten::{_name}_", _same_unary(_ir))


@RULES.rule("aten::gelu", "aten::gelu_")
def gelu(ctx: LoweringContext) -> Value:
    approx = ctx.const("approximate") if ctx.has("approximate") else "none"
    return ctx.b.op("gelu", ctx.tensor(0), approximate=str(approx))


def _scaled(ctx: LoweringContext, other: Any, alpha: Any) -> Any:
    if alpha is None or (not isinstance(alpha, Value) and alpha == 1):
        return other
    if isinstance(other, Value) or isinstance(alpha, Value):
        o, a = ctx.promoted(other, alpha)
        return ctx.b.op("mul", o, a)
    return other * alpha


@RULES.rule("aten::add", "aten::add_", "aten::sub", "aten::sub_", "aten::subtract",
            "aten::rsub")
def add_sub(ctx: LoweringContext) -> Value:
    a, b = ctx.raw(0), ctx.raw(1)
    alpha = ctx.raw("alpha") if ctx.has("alpha") else None
    if ctx.kind == "aten::rsub":
        a, b = b, a
        out_dtype = ctx.promote(b, a)
    else:
        out_dtype = ctx.promote(a, b)
    if out_dtype is DType.BOOL and ctx.kind.startswith("aten::add"):
        x, y = ctx.promoted(a, b)
        return ctx.b.op("or", x, y)
    b = _scaled(ctx, b, alpha)
    x, y = ctx.promoted(a, b, dtype=out_dtype)
    kind = "add" if ctx.kind.startswith("aten::add") else "sub"
    return ctx.b.op(kind, x, y)


@RULES.rule("aten::mul", "aten::mul_", "aten::multiply")
def mul(ctx: LoweringContext) -> Value:
    a, b = ctx.raw(0), ctx.raw(1)
    dt = ctx.promote(a, b)
    x, y = ctx.promoted(a, b, dtype=dt)
    return ctx.b.op("and" if dt is DType.BOOL else "mul", x, y)


@RULES.rule("aten::div", "aten::div_", "aten::true_divide", "aten::divide")
def div(ctx: LoweringContext) -> Value:
    a, b = ctx.raw(0), ctx.raw(1)
    mode = ctx.const("rounding_mode") if ctx.has("rounding_mode") else None
    dt = ctx.promote(a, b)
    if mode is None:
        if not dt.is_float:
            dt = DType.F32
        x, y = ctx.promoted(a, b, dtype=dt)
        return ctx.b.op("div", x, y)
    x, y = ctx.promoted(a, b, dtype=dt)
    if mode == "trunc":
        if not dt.is_float:
            return ctx.b.op("div", x, y)
        q = ctx.b.op("div", x, y)
        return ctx.b.op("mul", ctx.b.op("sign", q), ctx.b.op("floor", ctx.b.op("abs", q)))
    if mode == "floor":
        if dt.is_float:
            return ctx.b.op("floor", ctx.b.op("div", x, y))
        q = ctx.b.op("div", x, y)
        # Integer division truncates; step down where the signs differ and it is inexact.
        back = ctx.b.op("mul", q, y)
        inexact = ctx.b.op("ne", back, x)
        zero = ctx.as_value(0, dt)
        neg = ctx.b.op("ne", ctx.b.op("lt", x, zero), ctx.b.op("lt", y, zero))
        fix = ctx.b.op("and", inexact, neg)
        return ctx.b.op("sub", q, ctx.b.cast(fix, dt))
    raise ctx.unsupported(f"rounding_mode={mode!r}")


@RULES.rule("aten::pow", "aten::pow_")
def pow_(ctx: LoweringContext) -> Value:
    a, b = ctx.raw(0), ctx.raw(1)
    dt = ctx.promote(a, b)
    if not isinstance(b, Value) and b == 2 and isinstance(a, Value):
        x = ctx.as_value(a, dt)
        return ctx.b.op("mul", x, x)
    if not isinstance(b, Value) and b == 0.5 and isinstance(a, Value) and dt.is_float:
        return ctx.b.op("sqrt", ctx.as_value(a, dt))
    x, y = ctx.promoted(a, b, dtype=dt)
    return ctx.b.op("pow", x, y)
