"""Emitters for element-wise ops. 1:1 ops are data tables served by one function;
ops with no NNEF operation of their own are spelled out from standard ones."""

from __future__ import annotations

import math

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.backends.nnef.emit.erf import emit_erf
from t2n.ir import DType, Op, Value

COMMON = EmitterTable("elementwise")


SAME_NAME = ["neg", "abs", "sign", "exp", "log", "log2", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sqrt", "rsqrt", "floor", "ceil", "sigmoid", "relu", "not", "add", "sub", "mul", "div", "pow", "min", "max", "lt", "gt", "le", "ge", "eq", "ne", "and", "or"]
"""IR ops whose NNEF operation has the same name and operands on both targets."""


def operands(ctx: EmitContext, op: Op) -> list[Raw]:
    """The op's inputs as operands of a broadcasting op of the output's rank."""
    rank = op.output.rank
    return [Raw(ctx.arg_at_rank(v, rank)) for v in op.inputs]


def same_name(name: str):  # type: ignore[no-untyped-def]
    def emit(ctx: EmitContext, op: Op) -> None:
        ctx.emit(op.output, name, *operands(ctx, op))

    return emit


for _k in SAME_NAME:
    COMMON.add(_k, same_name(_k))


def typed_literal(ctx: EmitContext, value: float, dtype: DType) -> Raw | float:
    """A float literal for a ``select`` branch (see :meth:`EmitContext.typed_float`)."""
    return ctx.typed_float(value, dtype)


@COMMON.emitter("rcp")
def rcp(ctx: EmitContext, op: Op) -> None:
    """``div(1, x)``: ``rcp`` is standard but tract spells it ``recip``."""
    ctx.emit(op.output, "div", 1.0, op.inputs[0])


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


def is_nan_standard(ctx: EmitContext, op: Op) -> None:
    x = op.inputs[0]
    ctx.emit(op.output, "ne", x, x)


def is_inf_standard(ctx: EmitContext, op: Op) -> None:
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


def silu_standard(ctx: EmitContext, op: Op) -> None:
    s = ctx.emit("silu_sig", "sigmoid", op.inputs[0])
    ctx.emit(op.output, "mul", op.inputs[0], Raw(s))


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

