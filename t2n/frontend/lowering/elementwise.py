"""Element-wise aten ops: unary math, binary arithmetic with PyTorch's type promotion,
comparisons, logical and bitwise ops, clamping and NaN tests. Activations live in
``activation.py``.

Type rules follow PyTorch: float-only math on integers computes in f32 (the default
dtype); ops that PyTorch keeps integral (abs, neg, sign, floor…) keep the dtype;
in-place variants keep the mutated tensor's dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from t2n.frontend.context import LoweringContext, host_array
from t2n.frontend.registry import RuleSet
from t2n.ir import Builder, DType, Value

RULES = RuleSet("elementwise")


# -- helpers shared with activation.py -------------------------------------------------

def floating(b: Builder, x: Value) -> Value:
    """``x`` in a float dtype: PyTorch computes float-only math on integers and bools
    in the default dtype, f32."""
    return x if x.type.dtype.is_float else b.cast(x, DType.F32)


def const(b: Builder, value: float | int | bool, like: Value | DType) -> Value:
    """A scalar constant of ``like``'s dtype."""
    dt = like if isinstance(like, DType) else like.type.dtype
    return b.const(host_array(value, dt), dt)


def may_be_nan(v: Value) -> bool:
    """Whether ``v`` can hold a NaN (float and not a NaN-free constant)."""
    if not v.type.dtype.is_float:
        return False
    if v.producer is not None and v.producer.kind == "const" and v.type.dtype is not DType.BF16:
        return bool(np.isnan(np.asarray(v.producer.attrs["data"].values(), dtype=np.float64)).any())
    return True


def keep_self_dtype(ctx: LoweringContext, result: Value) -> Value:
    """In-place ops (``add_``, ``lt_``…) write into ``self``: the result takes its dtype.
    ``__iand__``-style ops also rebind ``self`` (the driver does it only for ``op_``)."""
    dunder = ctx.kind in INPLACE_DUNDERS
    if not dunder and (ctx.kind.endswith("__") or not ctx.kind.endswith("_")):
        return result
    target = ctx.raw(0)
    if not isinstance(target, Value):
        return result
    result = ctx.b.cast(result, target.type.dtype)
    if dunder:
        ctx.lowering.env[ctx.torch_value(0).unique()] = result
    return result


INPLACE_DUNDERS = frozenset(["aten::__iand__", "aten::__ior__", "aten::__ixor__"])


def present(*xs: Any) -> list[Any]:
    return [x for x in xs if x is not None]


def clamp_values(ctx: LoweringContext, x: Value, lo: Any, hi: Any, dtype: DType | None = None) -> Value:
    """min(max(x, lo), hi), as PyTorch's clamp (hi wins when lo > hi). The bounds are
    scalars or tensors; ``dtype`` defaults to PyTorch's promotion of all three.
    A NaN ``x`` gives the bound in tract (its max/min ignore NaN), NaN in PyTorch."""
    dt = dtype or ctx.promote(*present(x, lo, hi))
    y = ctx.as_value(x, dt)
    if lo is not None:
        y = ctx.b.op("max", y, ctx.as_value(lo, dt))
    if hi is not None:
        y = ctx.b.op("min", y, ctx.as_value(hi, dt))
    return y


def is_nan(b: Builder, x: Value) -> Value:
    return b.op("is_nan", x) if x.type.dtype.is_float else b.op("ne", x, x)


# -- unary math --------------------------------------------------------------------------

FLOAT_UNARY = {
    "exp": "exp", "expm1": "expm1", "log": "log", "log1p": "log1p", "log2": "log2",
    "sqrt": "sqrt", "rsqrt": "rsqrt", "reciprocal": "rcp",
    "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan",
    "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "asinh": "asinh", "acosh": "acosh",
    "atanh": "atanh", "sigmoid": "sigmoid", "erf": "erf",
    "arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh",
    "arccosh": "acosh", "arctanh": "atanh", "special_expm1": "expm1", "special_erf": "erf",
    "special_log1p": "log1p",
}
"""aten name → IR op for unary ops that compute in floating point (ints are promoted)."""


def _float_unary(ir_op: str) -> Callable[[LoweringContext], Value]:
    def rule(ctx: LoweringContext) -> Value:
        return ctx.b.op(ir_op, floating(ctx.b, ctx.tensor(0)))

    return rule


def _exp2(b: Builder, x: Value) -> Value:
    return b.op("pow", const(b, 2.0, x), x)


def _log10(b: Builder, x: Value) -> Value:
    return b.op("mul", b.op("log", x), const(b, 1.0 / math.log(10.0), x))


def _erfc(b: Builder, x: Value) -> Value:
    return b.op("sub", const(b, 1.0, x), b.op("erf", x))


def _sinc(b: Builder, x: Value) -> Value:
    """sin(pi x) / (pi x), and 1 at 0."""
    px = b.op("mul", x, const(b, math.pi, x))
    q = b.op("div", b.op("sin", px), px)
    return b.op("select", b.op("eq", x, const(b, 0.0, x)), const(b, 1.0, x), q)


COMPOSED_FLOAT_UNARY: dict[str, Callable[[Builder, Value], Value]] = {
    "exp2": _exp2, "special_exp2": _exp2, "log10": _log10, "erfc": _erfc, "special_erfc": _erfc,
    "sinc": _sinc, "special_sinc": _sinc,
    "deg2rad": lambda b, x: b.op("mul", x, const(b, math.pi / 180.0, x)),
    "rad2deg": lambda b, x: b.op("mul", x, const(b, 180.0 / math.pi, x)),
}
"""Float-computing unary ops built from other IR ops."""


def _composed_unary(fn: Callable[[Builder, Value], Value]) -> Callable[[LoweringContext], Value]:
    def rule(ctx: LoweringContext) -> Value:
        return fn(ctx.b, floating(ctx.b, ctx.tensor(0)))

    return rule


for _name, _ir in FLOAT_UNARY.items():
    RULES.add(f"aten::{_name}", _float_unary(_ir))
    if not _name.startswith("special_"):
        RULES.add(f"aten::{_name}_", _float_unary(_ir))
for _name, _fn in COMPOSED_FLOAT_UNARY.items():
    RULES.add(f"aten::{_name}", _composed_unary(_fn))
    if not _name.startswith("special_"):
        RULES.add(f"aten::{_name}_", _composed_unary(_fn))


@RULES.rule("aten::neg", "aten::neg_", "aten::negative", "aten::negative_",
            "aten::abs", "aten::abs_", "aten::absolute", "aten::absolute_")
def neg_abs(ctx: LoweringContext) -> Value:
    """Keep the dtype (integers stay integers)."""
    return ctx.b.op("abs" if "abs" in ctx.kind else "neg", ctx.tensor(0))


@RULES.rule("aten::positive")
def positive(ctx: LoweringContext) -> Value:
    return ctx.tensor(0)


@RULES.rule("aten::square", "aten::square_")
def square(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    if x.type.dtype is DType.BOOL:
        x = ctx.b.cast(x, DType.I64)
    return ctx.b.op("square", x)


@RULES.rule("aten::sign", "aten::sign_", "aten::sgn", "aten::sgn_")
def sign(ctx: LoweringContext) -> Value:
    """PyTorch's sign of NaN is 0 (NNEF's and tract's is NaN); bools are their own sign."""
    x = ctx.tensor(0)
    if x.type.dtype is DType.BOOL:
        return x
    s = ctx.b.op("sign", x)
    if not x.type.dtype.is_float:
        return s
    return ctx.b.op("select", ctx.b.op("is_nan", x), const(ctx.b, 0.0, x), s)


@RULES.rule("aten::floor", "aten::floor_", "aten::ceil", "aten::ceil_", "aten::trunc",
            "aten::trunc_", "aten::fix", "aten::fix_")
def rounding(ctx: LoweringContext) -> Value:
    """Integers are already whole: they pass through."""
    x = ctx.tensor(0)
    if not x.type.dtype.is_float:
        return x
    name = ctx.kind.removeprefix("aten::").rstrip("_")
    return ctx.b.op("trunc" if name == "fix" else name, x)


@RULES.rule("aten::round", "aten::round_")
def round_(ctx: LoweringContext) -> Value:
    """Half to even; with ``decimals``, PyTorch's own formula: round(x * 10^d) / 10^d
    (round(x / 10^-d) * 10^-d for negative d)."""
    x = ctx.tensor(0)
    if not x.type.dtype.is_float:
        return x
    d = ctx.int("decimals") if ctx.has("decimals") else 0
    if d == 0:
        return ctx.b.op("round", x)
    p = const(ctx.b, 10.0 ** abs(d), x)
    if d > 0:
        return ctx.b.op("div", ctx.b.op("round", ctx.b.op("mul", x, p)), p)
    return ctx.b.op("mul", ctx.b.op("round", ctx.b.op("div", x, p)), p)


@RULES.rule("aten::frac", "aten::frac_")
def frac(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    return ctx.b.op("sub", x, ctx.b.op("trunc", x))


@RULES.rule("aten::logit", "aten::logit_", "aten::special_logit")
def logit(ctx: LoweringContext) -> Value:
    """log(x / (1 - x)), x first clamped to [eps, 1 - eps] when eps is given."""
    x = floating(ctx.b, ctx.tensor(0))
    eps = ctx.const("eps") if ctx.has("eps") else None
    if eps is not None:
        x = clamp_values(ctx, x, float(eps), 1.0 - float(eps), x.type.dtype)
    return ctx.b.op("log", ctx.b.op("div", x, ctx.b.op("sub", const(ctx.b, 1.0, x), x)))


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
    # Integer division truncates: step down where it is inexact and the signs differ.
    zero = const(ctx.b, 0, dt)
    inexact = ctx.b.op("ne", ctx.b.op("mul", q, y), x)
    signs = ctx.b.op("xor", ctx.b.op("lt", x, zero), ctx.b.op("lt", y, zero))
    return ctx.b.op("sub", q, ctx.b.cast(ctx.b.op("and", inexact, signs), dt))


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
    a - floor(a / b) * b on floats; on integers the C remainder plus b where the signs
    differ."""
    a, b = ctx.raw(0), ctx.raw(1)
    dt = ctx.promote(a, b)
    x, y = ctx.promoted(a, b, dtype=dt)
    q = ctx.b.op("div", x, y)
    if dt.is_float:
        q = ctx.b.op("trunc" if "fmod" in ctx.kind else "floor", q)
    r = ctx.b.op("sub", x, ctx.b.op("mul", q, y))
    if dt.is_float or "fmod" in ctx.kind:
        return keep_self_dtype(ctx, r)
    zero = const(ctx.b, 0, dt)
    fix = ctx.b.op("and", ctx.b.op("ne", r, zero),
                   ctx.b.op("xor", ctx.b.op("lt", r, zero), ctx.b.op("lt", y, zero)))
    return keep_self_dtype(ctx, ctx.b.op("select", fix, ctx.b.op("add", r, y), r))


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


# -- clamping, interpolation, fused arithmetic -----------------------------------------

@RULES.rule("aten::clamp", "aten::clamp_", "aten::clip", "aten::clip_")
def clamp(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    out = clamp_values(ctx, x, ctx.optional(1), ctx.optional(2) if ctx.n_inputs > 2 else None)
    return keep_self_dtype(ctx, out)


@RULES.rule("aten::clamp_min", "aten::clamp_min_", "aten::clamp_max", "aten::clamp_max_")
def clamp_one_side(ctx: LoweringContext) -> Value:
    x, bound = ctx.tensor(0), ctx.raw(1)
    lo, hi = (bound, None) if "min" in ctx.kind else (None, bound)
    return keep_self_dtype(ctx, clamp_values(ctx, x, lo, hi))


@RULES.rule("aten::lerp", "aten::lerp_")
def lerp(ctx: LoweringContext) -> Value:
    """PyTorch's two-sided formula: start + w * (end - start) for |w| < 0.5, else
    end - (end - start) * (1 - w), exact at both ends."""
    s, e, w = ctx.raw(0), ctx.raw(1), ctx.raw(2)
    dt = ctx.promote(s, e, w)
    start, end = ctx.promoted(s, e, dtype=dt)
    diff = ctx.b.op("sub", end, start)
    weight = ctx.as_value(w, dt)
    low = ctx.b.op("add", start, ctx.b.op("mul", weight, diff))
    high = ctx.b.op("sub", end, ctx.b.op("mul", diff, ctx.b.op("sub", const(ctx.b, 1.0, dt), weight)))
    if not isinstance(w, Value):
        return keep_self_dtype(ctx, low if abs(float(w)) < 0.5 else high)
    near_start = ctx.b.op("lt", ctx.b.op("abs", weight), const(ctx.b, 0.5, dt))
    return keep_self_dtype(ctx, ctx.b.op("select", near_start, low, high))


@RULES.rule("aten::addcmul", "aten::addcmul_", "aten::addcdiv", "aten::addcdiv_")
def addc(ctx: LoweringContext) -> Value:
    """self + value * t1 * t2 (or / t2), evaluated in PyTorch's order."""
    s, t1, t2 = ctx.raw(0), ctx.raw(1), ctx.raw(2)
    value = ctx.raw("value") if ctx.has("value") else 1
    dt = ctx.promote(s, t1, t2)
    if "div" in ctx.kind and not dt.is_float:
        raise ctx.unsupported("addcdiv of integer tensors")
    base, a, b = ctx.promoted(s, t1, t2, dtype=dt)
    if isinstance(value, Value) or value != 1:
        a = ctx.b.op("mul", ctx.as_value(value, dt), a)
    term = ctx.b.op("div" if "div" in ctx.kind else "mul", a, b)
    return keep_self_dtype(ctx, ctx.b.op("add", base, term))


# -- NaN and infinity tests --------------------------------------------------------------

@RULES.rule("aten::isnan")
def isnan(ctx: LoweringContext) -> Value:
    return is_nan(ctx.b, ctx.tensor(0))


@RULES.rule("aten::isinf", "aten::isposinf", "aten::isneginf")
def isinf(ctx: LoweringContext) -> Value:
    """Integers are never infinite (x != x is an all-false mask of x's shape)."""
    x = ctx.tensor(0)
    if not x.type.dtype.is_float:
        return ctx.b.op("ne", x, x)
    kind = ctx.kind.removeprefix("aten::")
    return ctx.b.op("is_inf", x, detect_positive=kind != "isneginf", detect_negative=kind != "isposinf")


@RULES.rule("aten::isfinite")
def isfinite(ctx: LoweringContext) -> Value:
    """x - x is 0 exactly when x is finite (inf - inf and NaN - NaN are NaN)."""
    x = ctx.tensor(0)
    if not x.type.dtype.is_float:
        return ctx.b.op("eq", x, x)
    return ctx.b.op("eq", ctx.b.op("sub", x, x), const(ctx.b, 0.0, x))


def finfo_max(dtype: DType) -> float:
    """The largest finite value of a float dtype."""
    if dtype is DType.BF16:
        return float.fromhex("0x1.fep127")
    return float(np.finfo(dtype.numpy).max)


@RULES.rule("aten::nan_to_num", "aten::nan_to_num_")
def nan_to_num(ctx: LoweringContext) -> Value:
    """NaN → nan (0), +inf → posinf, -inf → neginf (default: the dtype's extremes)."""
    x = ctx.tensor(0)
    if not x.type.dtype.is_float:
        return x
    top = finfo_max(x.type.dtype)
    nan, pos, neg = (ctx.const(k) if ctx.has(k) else None for k in ("nan", "posinf", "neginf"))
    b = ctx.b
    y = b.op("select", b.op("is_inf", x, detect_positive=True, detect_negative=False),
             const(b, top if pos is None else pos, x), x)
    y = b.op("select", b.op("is_inf", x, detect_positive=False, detect_negative=True),
             const(b, -top if neg is None else neg, x), y)
    return b.op("select", b.op("is_nan", x), const(b, 0.0 if nan is None else nan, x), y)
