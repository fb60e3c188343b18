"""tract's emitters of the elementwise family (the forms both targets share are in
:mod:`t2n.backends.nnef.emit.elementwise`)."""

from __future__ import annotations

import math

import numpy as np

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.backends.nnef.emit.elementwise import (
    gelu_from_erf,
    is_inf_standard,
    is_nan_standard,
    operands,
    same_name,
    silu_standard,
    typed_literal,
)
from t2n.backends.tract.versions import F64_ABS, INT_DIV_BY_CONSTANT, INT_SIGN, tract_has
from t2n.ir import DType, Op, Value

TRACT = EmitterTable("elementwise/tract")


TRACT_NAMES = {
    "erf": "tract_core_erf", "round": "tract_core_round_even", "xor": "tract_core_xor",
    "bitand": "tract_core_bitand", "bitor": "tract_core_bitor",
    "bitxor": "tract_core_bitxor", "bitnot": "tract_core_bitnot",
}
"""IR ops that map 1:1 onto a tract extension. Bitwise ops on integers have no
standard NNEF form: Khronos refuses them."""


for _k, _name in TRACT_NAMES.items():
    if _k != "round":  # round_tract below (f64)
        TRACT.add(_k, same_name(_name))


@TRACT.emitter("round")
def round_tract(ctx: EmitContext, op: Op) -> None:
    """tract's round_even has no f64 kernel: there, floor(x) plus one where the fraction
    x - floor(x) (exact in floating point) is above a half, or is a half and floor(x) is odd."""
    x = op.inputs[0]
    if x.type.dtype is not DType.F64:
        ctx.emit(op.output, "tract_core_round_even", x)
        return

    def f64(value: float) -> Raw:
        return Raw(ctx.call("tract_core_cast", value, to="f64"))

    fl = Raw(ctx.emit("round_floor", "floor", x))
    frac = Raw(ctx.emit("round_frac", "sub", x, fl))
    odd = Raw(ctx.call("eq", Raw(ctx.call("sub", fl, Raw(ctx.call("mul", f64(2.0), Raw(ctx.call(
        "floor", Raw(ctx.call("mul", fl, f64(0.5))))))))), f64(1.0)))
    tie_odd = Raw(ctx.call("and", Raw(ctx.call("eq", frac, f64(0.5))), odd))
    up = Raw(ctx.emit("round_up", "or", Raw(ctx.call("gt", frac, f64(0.5))), tie_odd))
    ctx.emit(op.output, "select", up, Raw(ctx.call("add", fl, f64(1.0))), fl)


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


@TRACT.emitter("is_nan")
def is_nan_tract(ctx: EmitContext, op: Op) -> None:
    """tract's is_nan and is_inf have no f64 kernel (and no is_nan before 0.23)."""
    if op.inputs[0].type.dtype is DType.F64 or not tract_has(ctx, "tract_core_is_nan"):
        is_nan_standard(ctx, op)
    else:
        ctx.emit(op.output, "tract_core_is_nan", op.inputs[0])


@TRACT.emitter("is_inf")
def is_inf_tract(ctx: EmitContext, op: Op) -> None:
    if tract_has(ctx, "tract_core_is_inf") and op.inputs[0].type.dtype is not DType.F64:
        ctx.emit(op.output, "tract_core_is_inf", op.inputs[0],
                 detect_positive=bool(op.attrs.get("detect_positive", True)),
                 detect_negative=bool(op.attrs.get("detect_negative", True)))
    else:
        is_inf_standard(ctx, op)


@TRACT.emitter("silu")
def silu_tract(ctx: EmitContext, op: Op) -> None:
    if tract_has(ctx, "tract_core_silu"):
        ctx.emit(op.output, "tract_core_silu", op.inputs[0])
    else:
        silu_standard(ctx, op)


TRACT.add("hard_swish", same_name("tract_core_hard_swish"))


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

