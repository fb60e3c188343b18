"""Emitters for element-wise ops. 1:1 ops are data tables served by one function;
ops with no NNEF operation of their own are spelled out from standard ones."""

from __future__ import annotations

import math

import numpy as np

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.backends.nnef.emit.erf import emit_erf
from t2n.backends.nnef.versions import F64_ABS, INT_DIV_BY_CONSTANT, INT_SIGN, tract_has
from t2n.ir import DType, Op, Value

COMMON = EmitterTable("elementwise")
TRACT = EmitterTable("elementwise/tract")
KHRONOS = EmitterTable("elementwise/khronos")

SAME_NAME = ["neg", "abs", "sign", "exp", "log", "log2", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sqrt", "rsqrt", "floor", "ceil", "sigmoid", "relu", "not", "add", "sub", "mul", "div", "pow", "min", "max", "lt", "gt", "le", "ge", "eq", "ne", "and", "or"]
"""IR ops whose NNEF operation has the same name and operands on both targets."""

TRACT_NAMES = {
    "erf": "tract_core_erf", "round": "tract_core_round_even", "xor": "tract_core_xor",
    "bitand": "tract_core_bitand", "bitor": "tract_core_bitor",
    "bitxor": "tract_core_bitxor", "bitnot": "tract_core_bitnot",
}
"""IR ops that map 1:1 onto a tract extension. Bitwise ops on integers have no
standard NNEF form: Khronos refuses them."""


def operands(ctx: EmitContext, op: Op) -> list[Raw]:
    """The op's inputs as operands of a broadcasting op of the output's rank."""
    rank = op.output.rank
    return [Raw(ctx.arg_at_rank(v, rank)) for v in op.inputs]


def _same(name: str):  # type: ignore[no-untyped-def]
    def emit(ctx: EmitContext, op: Op) -> None:
        ctx.emit(op.output, name, *operands(ctx, op))

    return emit


for _k in SAME_NAME:
    COMMON.add(_k, _same(_k))
for _k, _name in TRACT_NAMES.items():
    TRACT.add(_k, _same(_name))

KHRONOS.add("round", _same("round"))
KHRONOS.add("select", _same("select"))


def typed_literal(ctx: EmitContext, value: float, dtype: DType) -> Raw | float:
    """A float literal for a ``select`` branch (see :meth:`EmitContext.typed_float`)."""
    return ctx.typed_float(value, dtype)


def _f32_exact(x: float) -> bool:
    with np.errstate(over="ignore"):
        return float(np.float32(x)) == x


@TRACT.emitter("select")
def select_tract(ctx: EmitContext, op: Op) -> None:
    """Scalar float branches become typed literals (f64 ones that f32 cannot hold
    go to a .dat through ``arg``)."""
    cond, a, b = op.inputs
    branches: list[Raw | float] = []
    for v in (a, b):
        data = ctx.const_data(v)
        value = float(data.item()) if data is not None and data.ndim == 0 and v.type.dtype.is_float else None
        if value is not None and not math.isnan(value) and _f32_exact(value):
            branches.append(typed_literal(ctx, value, v.type.dtype))
        else:
            branches.append(Raw(ctx.arg_at_rank(v, op.output.rank)))
    ctx.emit(op.output, "select", Raw(ctx.arg_at_rank(cond, op.output.rank)), *branches)


@COMMON.emitter("rcp")
def rcp(ctx: EmitContext, op: Op) -> None:
    """``div(1, x)``: ``rcp`` is standard but tract spells it ``recip``."""
    ctx.emit(op.output, "div", 1.0, op.inputs[0])


def _int_square_tract(ctx: EmitContext, op: Op) -> None:
    """tract rewrites ``mul(x, x)`` (and ``pow(x, 2)``) into its ``square``, which has
    no integer kernel: ``-((-x) * x)`` keeps the operands distinct."""
    x = op.inputs[0]
    ctx.emit(op.output, "neg", Raw(ctx.call("mul", Raw(ctx.emit("sq_neg", "neg", x)), x)))


@TRACT.emitter("square")
def square_tract(ctx: EmitContext, op: Op) -> None:
    if op.inputs[0].type.dtype.is_float:
        ctx.emit(op.output, "square", op.inputs[0])
    else:
        _int_square_tract(ctx, op)


@TRACT.emitter("mul")
def mul_tract(ctx: EmitContext, op: Op) -> None:
    a, b = op.inputs
    if a is b and not a.type.dtype.is_float:
        _int_square_tract(ctx, op)
    else:
        ctx.emit(op.output, "mul", *operands(ctx, op))


@KHRONOS.emitter("square")
def square_khronos(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, "mul", op.inputs[0], op.inputs[0])


@COMMON.emitter("trunc")
def trunc(ctx: EmitContext, op: Op) -> None:
    """Rounds toward zero: ceil below zero, floor above (neither target has trunc)."""
    x = Raw(ctx.arg(op.inputs[0]))
    neg = ctx.emit("trunc_neg", "lt", x, 0.0)
    ctx.emit(op.output, "select", Raw(neg), Raw(ctx.call("ceil", x)), Raw(ctx.call("floor", x)))


@COMMON.emitter("expm1")
def expm1(ctx: EmitContext, op: Op) -> None:
    """exp(x) - 1 without the cancellation near 0 (Kahan: (u - 1) * x / log(u) with
    u = exp(x) is exact to a few ulps there); exp(x) - 1 elsewhere."""
    x = Raw(ctx.arg(op.inputs[0]))
    u = Raw(ctx.emit("em1_exp", "exp", x))
    um1 = Raw(ctx.emit("em1_um1", "sub", u, 1.0))
    k = Raw(ctx.emit("em1_k", "div", Raw(ctx.call("mul", um1, x)), Raw(ctx.call("log", u))))
    near = Raw(ctx.emit("em1_near", "select", Raw(ctx.call("eq", um1, 0.0)), x, k))
    small = Raw(ctx.emit("em1_small", "lt", Raw(ctx.call("abs", x)), 0.5))
    ctx.emit(op.output, "select", small, near, um1)


@COMMON.emitter("log1p")
def log1p(ctx: EmitContext, op: Op) -> None:
    """log(1 + x) without the cancellation near 0 (Kahan: log(u) * x / (u - 1) with
    u = 1 + x corrects the rounding of u)."""
    x = Raw(ctx.arg(op.inputs[0]))
    u = Raw(ctx.emit("l1p_u", "add", x, 1.0))
    ratio = Raw(ctx.emit("l1p_ratio", "div", x, Raw(ctx.call("sub", u, 1.0))))
    k = Raw(ctx.emit("l1p_k", "mul", Raw(ctx.call("log", u)), ratio))
    ctx.emit(op.output, "select", Raw(ctx.call("eq", u, 1.0)), x, k)


@COMMON.emitter("atan2")
def atan2(ctx: EmitContext, op: Op) -> None:
    """atan(y / x) moved to the right quadrant; a -0.0 ``y`` counts as negative (as in
    PyTorch) so that atan2(-0.0, -1) is -pi."""
    y, x = operands(ctx, op)
    a = Raw(ctx.emit("atan2_a", "atan", Raw(ctx.call("div", y, x))))
    yneg = Raw(ctx.emit("atan2_yneg", "or", Raw(ctx.call("lt", y, 0.0)),
                        Raw(ctx.call("lt", Raw(ctx.call("div", 1.0, y)), 0.0))))
    left = Raw(ctx.emit("atan2_left", "select", yneg, Raw(ctx.call("sub", a, math.pi)),
                        Raw(ctx.call("add", a, math.pi))))
    dt = op.output.type.dtype
    half, minus_half = typed_literal(ctx, math.pi / 2, dt), typed_literal(ctx, -math.pi / 2, dt)
    vertical = Raw(ctx.emit("atan2_v", "select", Raw(ctx.call("gt", y, 0.0)), half,
                            Raw(ctx.call("select", Raw(ctx.call("lt", y, 0.0)), minus_half, y))))
    inner = Raw(ctx.emit("atan2_in", "select", Raw(ctx.call("lt", x, 0.0)), left, vertical))
    ctx.emit(op.output, "select", Raw(ctx.call("gt", x, 0.0)), a, inner)


def _is_nan_generic(ctx: EmitContext, op: Op) -> None:
    x = op.inputs[0]
    ctx.emit(op.output, "ne", x, x)


@TRACT.emitter("is_nan")
def is_nan_tract(ctx: EmitContext, op: Op) -> None:
    """tract's is_nan and is_inf have no f64 kernel (and no is_nan before 0.23)."""
    if op.inputs[0].type.dtype is DType.F64 or not tract_has(ctx, "tract_core_is_nan"):
        _is_nan_generic(ctx, op)
    else:
        ctx.emit(op.output, "tract_core_is_nan", op.inputs[0])


KHRONOS.add("is_nan", _is_nan_generic)


def _is_inf_generic(ctx: EmitContext, op: Op) -> None:
    """Infinite: equal to itself (not NaN) but x - x is NaN."""
    x = Raw(ctx.arg(op.inputs[0]))
    pos, neg = bool(op.attrs.get("detect_positive", True)), bool(op.attrs.get("detect_negative", True))
    if not (pos or neg):
        ctx.emit(op.output, "lt", Raw(ctx.call("abs", x)), 0.0)
        return
    d = Raw(ctx.emit("inf_d", "sub", x, x))
    args = (Raw(ctx.call("eq", x, x)), Raw(ctx.call("ne", d, d)))
    if pos and neg:
        ctx.emit(op.output, "and", *args)
        return
    inf = Raw(ctx.emit("inf_any", "and", *args))
    ctx.emit(op.output, "and", inf, Raw(ctx.call("gt" if pos else "lt", x, 0.0)))


@TRACT.emitter("is_inf")
def is_inf_tract(ctx: EmitContext, op: Op) -> None:
    if tract_has(ctx, "tract_core_is_inf") and op.inputs[0].type.dtype is not DType.F64:
        ctx.emit(op.output, "tract_core_is_inf", op.inputs[0],
                 detect_positive=bool(op.attrs.get("detect_positive", True)),
                 detect_negative=bool(op.attrs.get("detect_negative", True)))
    else:
        _is_inf_generic(ctx, op)


KHRONOS.add("is_inf", _is_inf_generic)


@COMMON.emitter("leaky_relu")
def leaky_relu(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, "leaky_relu", op.inputs[0], alpha=float(op.attrs["alpha"]))


@COMMON.emitter("elu")
def elu(ctx: EmitContext, op: Op) -> None:
    """Spelled out: tract's ``elu`` fragment ignores alpha, and neither target has
    PyTorch's scale and input_scale."""
    x = op.inputs[0]
    alpha = float(op.attrs["alpha"])
    scale = float(op.attrs.get("scale", 1.0))
    input_scale = float(op.attrs.get("input_scale", 1.0))
    ex = Raw(ctx.call("mul", x, input_scale)) if input_scale != 1.0 else x
    e = ctx.emit("elu_exp", "exp", ex)
    em1 = ctx.emit("elu_em1", "sub", Raw(e), 1.0)
    neg = ctx.emit("elu_neg", "mul", Raw(em1), alpha * scale)
    pos = ctx.emit("elu_pos", "gt", x, 0.0)
    if scale == 1.0:
        ctx.emit(op.output, "select", Raw(pos), x, Raw(neg))
    else:
        ctx.emit(op.output, "select", Raw(pos), Raw(ctx.call("mul", x, scale)), Raw(neg))


@COMMON.emitter("softplus")
def softplus(ctx: EmitContext, op: Op) -> None:
    """max(x, 0) + log1p(exp(-|x|)): no overflow for large x (NNEF's fragment
    overflows), and log1p spelled out exactly (Kahan) so that the tail keeps its
    relative precision (log(1 + e) in f16 is off by up to 10% for small e)."""
    x = op.inputs[0]
    e = Raw(ctx.emit("sp_exp", "exp", Raw(ctx.emit("sp_nabs", "neg", Raw(ctx.call("abs", x))))))
    u = Raw(ctx.emit("sp_u", "add", e, 1.0))
    ratio = Raw(ctx.emit("sp_ratio", "div", e, Raw(ctx.call("sub", u, 1.0))))
    k = Raw(ctx.emit("sp_k", "mul", Raw(ctx.call("log", u)), ratio))
    lp = Raw(ctx.emit("sp_log1p", "select", Raw(ctx.call("eq", u, 1.0)), e, k))
    ctx.emit(op.output, "add", Raw(ctx.call("relu", x)), lp)


def _silu_generic(ctx: EmitContext, op: Op) -> None:
    s = ctx.emit("silu_sig", "sigmoid", op.inputs[0])
    ctx.emit(op.output, "mul", op.inputs[0], Raw(s))


@TRACT.emitter("silu")
def silu_tract(ctx: EmitContext, op: Op) -> None:
    if tract_has(ctx, "tract_core_silu"):
        ctx.emit(op.output, "tract_core_silu", op.inputs[0])
    else:
        _silu_generic(ctx, op)


KHRONOS.add("silu", _silu_generic)


def _hard_swish_generic(ctx: EmitContext, op: Op) -> None:
    x = op.inputs[0]
    c = ctx.emit("hs_clamp", "clamp", Raw(ctx.call("add", x, 3.0)), 0.0, 6.0)
    d = ctx.emit("hs_div", "div", Raw(c), 6.0)
    ctx.emit(op.output, "mul", x, Raw(d))


TRACT.add("hard_swish", _same("tract_core_hard_swish"))
KHRONOS.add("hard_swish", _hard_swish_generic)


def gelu_from_erf(ctx: EmitContext, op: Op, erf_op: str | None, x: Value | Raw | None = None,
                  out: Value | str | None = None, half_first: bool = False) -> str:
    """Exact GELU, ``x · (1 + erf(x / √2)) / 2``, through ``erf_op`` (None: the
    standard-operation expansion of :mod:`t2n.backends.nnef.emit.erf`), from ``x`` (default
    the op's input) into ``out`` (default its output; a text is a name hint). Returns the
    name of the result. ``half_first`` writes ``(x · 0.5) · (erf(x / √2) + 1)``: the
    order tract's optimiser recognises and runs as one fused ``GeluExact`` kernel (it
    leaves ``x · ((erf + 1) · 0.5)`` as four ops); halving is exact, so both orders give
    the same bits."""
    x = op.inputs[0] if x is None else x
    if op.attrs.get("approximate", "none") == "tanh":
        x3 = ctx.emit("gelu_x3", "mul", Raw(ctx.call("mul", x, x)), x)
        inner = ctx.emit("gelu_in", "mul", Raw(ctx.call("add", x, Raw(ctx.call("mul", Raw(x3), 0.044715)))),
                         math.sqrt(2.0 / math.pi))
        t = ctx.emit("gelu_t", "tanh", Raw(inner))
    else:
        if erf_op:
            t = ctx.emit("gelu_erf", erf_op, Raw(ctx.call("mul", x, 1.0 / math.sqrt(2.0))))
        else:
            t = emit_erf(ctx, "gelu_erf", Raw(ctx.emit("gelu_s", "mul", x, 1.0 / math.sqrt(2.0))))
    if half_first:
        h = ctx.emit("gelu_h", "mul", x, 0.5)
        return ctx.emit(op.output if out is None else out, "mul", Raw(h), Raw(ctx.call("add", Raw(t), 1.0)))
    h = ctx.emit("gelu_h", "mul", Raw(ctx.call("add", Raw(t), 1.0)), 0.5)
    return ctx.emit(op.output if out is None else out, "mul", x, Raw(h))


@TRACT.emitter("gelu")
def gelu_tract(ctx: EmitContext, op: Op) -> None:
    """The fused tanh form where tract has it; otherwise the formula, computed in f32 for
    an f16 tensor and rounded once at the end as PyTorch does (step by step in f16, the
    roundings of erf and 1 + erf put 40% of the outputs off, small ones by far)."""
    if op.attrs.get("approximate", "none") == "tanh" and tract_has(ctx, "tract_core_gelu_approx"):
        ctx.emit(op.output, "tract_core_gelu_approx", op.inputs[0], fast_impl=False)
    elif op.output.type.dtype is DType.F16:
        wide = Raw(ctx.emit("gelu_f32", "tract_core_cast", op.inputs[0], to="f32"))
        result = gelu_from_erf(ctx, op, "tract_core_erf", x=wide, out="gelu_wide", half_first=True)
        ctx.emit(op.output, "tract_core_cast", Raw(result), to="f16")
    else:
        gelu_from_erf(ctx, op, "tract_core_erf", half_first=True)


@KHRONOS.emitter("gelu")
def gelu_khronos(ctx: EmitContext, op: Op) -> None:
    """Exact GELU through erf spelled out: the standard ``gelu`` fragment is a sigmoid approximation."""
    gelu_from_erf(ctx, op, None)


@KHRONOS.emitter("erf")
def erf_khronos(ctx: EmitContext, op: Op) -> None:
    """Standard NNEF has no erf: spelled out in standard operations."""
    emit_erf(ctx, op.output, op.inputs[0])


@KHRONOS.emitter("xor")
def xor_khronos(ctx: EmitContext, op: Op) -> None:
    """Standard NNEF has no xor, and ``ne`` is defined on scalars only."""
    a, b = operands(ctx, op)
    left = Raw(ctx.emit("xor_l", "and", a, Raw(ctx.emit("xor_nb", "not", b))))
    right = Raw(ctx.emit("xor_r", "and", Raw(ctx.emit("xor_na", "not", a)), b))
    ctx.emit(op.output, "or", left, right)


def _int_literal(ctx: EmitContext, value: int, dtype: DType) -> Raw:
    return Raw(ctx.call("tract_core_cast", Raw(str(value)), to=dtype.value))


@TRACT.emitter("sign")
def sign_tract(ctx: EmitContext, op: Op) -> None:
    """Older tract has no integer ``sign`` kernel: (x > 0) - (x < 0), cast back."""
    x, dt = op.inputs[0], op.output.type.dtype
    if not dt.is_int or tract_has(ctx, INT_SIGN):
        ctx.emit(op.output, "sign", x)
        return
    zero = _int_literal(ctx, 0, dt)
    pos = Raw(ctx.call("tract_core_cast", Raw(ctx.call("gt", x, zero)), to=dt.value))
    neg = Raw(ctx.call("tract_core_cast", Raw(ctx.call("lt", x, zero)), to=dt.value))
    ctx.emit(op.output, "sub", pos, neg)


@TRACT.emitter("div")
def div_tract(ctx: EmitContext, op: Op) -> None:
    """Older tract rounds an integer division by a constant towards -inf for negative
    numerators (its rewrite into a multiply and shift), not towards zero: divide the
    magnitude, then restore the sign."""
    a, b = operands(ctx, op)
    _truncated_div(ctx, op, op.output, a, b)


def _truncated_div(ctx: EmitContext, op: Op, out: Value | str, a: Raw, b: Raw) -> str:
    dt = op.output.type.dtype
    if not dt.is_int or ctx.const_data(op.inputs[1]) is None or tract_has(ctx, INT_DIV_BY_CONSTANT):
        return ctx.emit(out, "div", a, b)
    negative = Raw(ctx.emit("idiv_neg", "lt", a, _int_literal(ctx, 0, dt)))
    magnitude = Raw(ctx.emit("idiv_mag", "div", Raw(ctx.call("neg", a)), b))
    return ctx.emit(out, "select", negative, Raw(ctx.call("neg", magnitude)), Raw(ctx.call("div", a, b)))


@TRACT.emitter("floor_div")
def floor_div_tract(ctx: EmitContext, op: Op) -> None:
    """Rounded toward -inf: floats floor the quotient; integers step the truncated
    quotient down where it is inexact and the signs differ."""
    a, b = operands(ctx, op)
    dt = op.output.type.dtype
    if not dt.is_int:
        ctx.emit(op.output, "floor", Raw(ctx.emit("fdiv_q", "div", a, b)))
        return
    q = Raw(_truncated_div(ctx, op, "fdiv_q", a, b))
    zero = _int_literal(ctx, 0, dt)
    inexact = Raw(ctx.emit("fdiv_inexact", "ne", Raw(ctx.call("mul", q, b)), a))
    signs = Raw(ctx.emit("fdiv_signs", "tract_core_xor", Raw(ctx.call("lt", a, zero)), Raw(ctx.call("lt", b, zero))))
    step = Raw(ctx.emit("fdiv_step", "tract_core_cast", Raw(ctx.call("and", inexact, signs)), to=dt.value))
    ctx.emit(op.output, "sub", q, step)


@TRACT.emitter("abs")
def abs_tract(ctx: EmitContext, op: Op) -> None:
    """Older tract has no f64 ``abs`` kernel: select(x < 0, -x, x)."""
    x = op.inputs[0]
    if x.type.dtype is not DType.F64 or tract_has(ctx, F64_ABS):
        ctx.emit(op.output, "abs", x)
        return
    zero = Raw(ctx.call("tract_core_cast", 0.0, to="f64"))
    ctx.emit(op.output, "select", Raw(ctx.call("lt", x, zero)), Raw(ctx.call("neg", x)), x)
