"""Element-wise aten ops: unary math, clamping, interpolation and fused arithmetic,
and the helpers the other element-wise families share. Binary arithmetic lives in
``arithmetic.py``, comparisons and logic in ``logical.py``, activations in
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


_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                   -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)
"""M. Giles' single-precision approximation of erfinv ("Approximating the erfinv
function", GPU Computing Gems, 2011): polynomials in ``w = -log(1 - x^2)``, below 5 and
above."""


def _polynomial(b: Builder, w: Value, coefficients: tuple[float, ...]) -> Value:
    """Horner's rule, highest power first."""
    p = const(b, coefficients[0], w)
    for c in coefficients[1:]:
        p = b.op("add", b.op("mul", p, w), const(b, c, w))
    return p


def _erfinv(b: Builder, x: Value) -> Value:
    """erfinv by Giles' approximation (relative error near f32 rounding); +-inf at +-1 and
    NaN beyond, as PyTorch. A constant input folds to a constant."""
    one = const(b, 1.0, x)
    w = b.op("neg", b.op("log", b.op("mul", b.op("sub", one, x), b.op("add", one, x))))
    central = _polynomial(b, b.op("sub", w, const(b, 2.5, x)), _ERFINV_CENTRAL)
    tail = _polynomial(b, b.op("sub", b.op("sqrt", w), const(b, 3.0, x)), _ERFINV_TAIL)
    y = b.op("mul", b.op("select", b.op("lt", w, const(b, 5.0, x)), central, tail), x)
    edge = b.op("eq", b.op("abs", x), one)
    return b.op("select", edge, b.op("mul", x, const(b, math.inf, x)), y)


COMPOSED_FLOAT_UNARY: dict[str, Callable[[Builder, Value], Value]] = {
    "erfinv": _erfinv, "special_erfinv": _erfinv,
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


@RULES.rule("aten::neg", "aten::neg_", "aten::_neg_view", "aten::negative", "aten::negative_",
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
