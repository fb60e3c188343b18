"""Comparison, logical and bitwise aten ops (bools compared as numbers, bitwise ops on
bools as logical ones)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from t2n.frontend.context import LoweringContext
from t2n.frontend.lowering.elementwise import (
    const,
    keep_self_dtype,
)
from t2n.frontend.registry import RuleSet
from t2n.ir import Builder, DType, Value

RULES = RuleSet("logical")


# -- comparisons, logical and bitwise ops ----------------------------------------------

COMPARISONS = {
    "eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge",
    "greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le", "not_equal": "ne",
}
"""aten name → IR comparison."""


def _bool_compare(b: Builder, kind: str, x: Value, y: Value) -> Value:
    """Comparisons of bools (False < True) from logical ops: tract compares only numbers."""
    nx, ny = b.op("not", x), b.op("not", y)
    if kind == "eq":
        return b.op("not", b.op("xor", x, y))
    if kind == "ne":
        return b.op("xor", x, y)
    return {"lt": lambda: b.op("and", nx, y), "gt": lambda: b.op("and", x, ny),
            "le": lambda: b.op("or", nx, y), "ge": lambda: b.op("or", x, ny)}[kind]()


def _compare(ir_op: str) -> Callable[[LoweringContext], Value]:
    def rule(ctx: LoweringContext) -> Value:
        a, b = ctx.raw(0), ctx.raw(1)
        dt = ctx.promote(a, b)
        x, y = ctx.promoted(a, b, dtype=dt)
        out = _bool_compare(ctx.b, ir_op, x, y) if dt is DType.BOOL else ctx.b.op(ir_op, x, y)
        return keep_self_dtype(ctx, out)

    return rule


for _name, _ir in COMPARISONS.items():
    RULES.add(f"aten::{_name}", _compare(_ir))
    RULES.add(f"aten::{_name}_", _compare(_ir))


def truth(ctx: LoweringContext, x: Any) -> Value:
    """Non-zero as bool."""
    v = ctx.as_value(x)
    if v.type.dtype is DType.BOOL:
        return v
    return ctx.b.op("ne", v, const(ctx.b, 0, v))


@RULES.rule("aten::logical_and", "aten::logical_and_", "aten::logical_or", "aten::logical_or_",
            "aten::logical_xor", "aten::logical_xor_")
def logical(ctx: LoweringContext) -> Value:
    kind = ctx.kind.removeprefix("aten::logical_").rstrip("_")
    return keep_self_dtype(ctx, ctx.b.op(kind, truth(ctx, ctx.raw(0)), truth(ctx, ctx.raw(1))))


@RULES.rule("aten::logical_not", "aten::logical_not_")
def logical_not(ctx: LoweringContext) -> Value:
    return keep_self_dtype(ctx, ctx.b.op("not", truth(ctx, ctx.raw(0))))


BITWISE = {
    "bitwise_and": "and", "__and__": "and", "__iand__": "and",
    "bitwise_or": "or", "__or__": "or", "__ior__": "or",
    "bitwise_xor": "xor", "__xor__": "xor", "__ixor__": "xor",
}
"""aten name → logical op; on integers the IR's ``bit`` op of the same name."""


def _bitwise(kind: str) -> Callable[[LoweringContext], Value]:
    def rule(ctx: LoweringContext) -> Value:
        a, b = ctx.raw(0), ctx.raw(1)
        dt = ctx.promote(a, b)
        if dt.is_float:
            raise ctx.unsupported(f"bitwise {kind} of floating-point tensors")
        x, y = ctx.promoted(a, b, dtype=dt)
        out = ctx.b.op(kind if dt is DType.BOOL else f"bit{kind}", x, y)
        return keep_self_dtype(ctx, out)

    return rule


for _name, _ir in BITWISE.items():
    RULES.add(f"aten::{_name}", _bitwise(_ir))
    if _name.startswith("bitwise"):
        RULES.add(f"aten::{_name}_", _bitwise(_ir))


@RULES.rule("aten::bitwise_not", "aten::bitwise_not_")
def bitwise_not(ctx: LoweringContext) -> Value:
    """``~mask`` on bools is logical not."""
    x = ctx.tensor(0)
    if x.type.dtype.is_float:
        raise ctx.unsupported("bitwise not of a floating-point tensor")
    return ctx.b.op("not" if x.type.dtype is DType.BOOL else "bitnot", x)


# -- sign bits and closeness -------------------------------------------------------

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
