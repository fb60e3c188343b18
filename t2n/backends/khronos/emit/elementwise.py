"""Khronos NNEF's emitters of the elementwise family (the forms both targets share are in
:mod:`t2n.backends.nnef.emit.elementwise`)."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.backends.nnef.emit.elementwise import (
    gelu_from_erf,
    is_inf_standard,
    is_nan_standard,
    operands,
    same_name,
    silu_standard,
)
from t2n.backends.nnef.emit.erf import emit_erf
from t2n.ir import Op

KHRONOS = EmitterTable("elementwise/khronos")


KHRONOS.add("round", same_name("round"))


KHRONOS.add("select", same_name("select"))


@KHRONOS.emitter("square")
def square_khronos(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, "mul", op.inputs[0], op.inputs[0])


KHRONOS.add("is_nan", is_nan_standard)


KHRONOS.add("is_inf", is_inf_standard)


KHRONOS.add("silu", silu_standard)


def _hard_swish_generic(ctx: EmitContext, op: Op) -> None:
    x = op.inputs[0]
    c = ctx.emit("hs_clamp", "clamp", Raw(ctx.call("add", x, 3.0)), 0.0, 6.0)
    d = ctx.emit("hs_div", "div", Raw(c), 6.0)
    ctx.emit(op.output, "mul", x, Raw(d))


KHRONOS.add("hard_swish", _hard_swish_generic)


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

