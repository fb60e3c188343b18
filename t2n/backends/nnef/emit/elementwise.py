"""Emitters for element-wise ops. 1:1 ops are data tables served by one function."""

from __future__ import annotations

import math

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.ir import Op

COMMON = EmitterTable("elementwise")
TRACT = EmitterTable("elementwise/tract")
KHRONOS = EmitterTable("elementwise/khronos")

SAME_NAME = ["neg", "abs", "sign", "exp", "log", "log2", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sqrt", "rsqrt", "floor", "ceil", "sigmoid", "relu", "not", "add", "sub", "mul", "div", "pow", "min", "max", "lt", "gt", "le", "ge", "eq", "ne", "and", "or", "select"]
"""IR ops whose NNEF operation has the same name and operands on both targets."""

TRACT_NAMES = {"erf": "tract_core_erf", "round": "tract_core_round_even", "xor": "tract_core_xor"}
"""IR ops that map 1:1 onto a tract extension."""


def _same(name: str):  # type: ignore[no-untyped-def]
    def emit(ctx: EmitContext, op: Op) -> None:
        rank = op.output.rank
        ctx.emit(op.output, name, *(Raw(ctx.arg_at_rank(v, rank)) for v in op.inputs))

    return emit


for _k in SAME_NAME:
    COMMON.add(_k, _same(_k))
for _k, _name in TRACT_NAMES.items():
    TRACT.add(_k, _same(_name))

KHRONOS.add("round", _same("round"))


@COMMON.emitter("rcp")
def rcp(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, "div", 1.0, op.inputs[0])


@COMMON.emitter("leaky_relu")
def leaky_relu(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, "leaky_relu", op.inputs[0], alpha=float(op.attrs["alpha"]))


@COMMON.emitter("elu")
def elu(ctx: EmitContext, op: Op) -> None:
    """Spelled out: tract's ``elu`` fragment ignores alpha."""
    x = op.inputs[0]
    e = ctx.emit("elu_exp", "exp", x)
    em1 = ctx.emit("elu_em1", "sub", e, 1.0)
    neg = ctx.emit("elu_neg", "mul", em1, float(op.attrs["alpha"]))
    pos = ctx.emit("elu_pos", "gt", x, 0.0)
    ctx.emit(op.output, "select", pos, x, neg)


@COMMON.emitter("softplus")
def softplus(ctx: EmitContext, op: Op) -> None:
    """max(x, 0) + log(1 + exp(-|x|)): no overflow for large x (NNEF's fragment overflows)."""
    x = op.inputs[0]
    a = ctx.emit("sp_abs", "abs", x)
    na = ctx.emit("sp_nabs", "neg", a)
    e = ctx.emit("sp_exp", "exp", na)
    lp = ctx.emit("sp_log", "log", ctx.call("add", e, 1.0))
    m = ctx.emit("sp_relu", "relu", x)
    ctx.emit(op.output, "add", m, lp)


def _silu_generic(ctx: EmitContext, op: Op) -> None:
    s = ctx.emit("silu_sig", "sigmoid", op.inputs[0])
    ctx.emit(op.output, "mul", op.inputs[0], s)


@TRACT.emitter("silu")
def silu_tract(ctx: EmitContext, op: Op) -> None:
    if ctx.target.at_least("0.23.0"):
        ctx.emit(op.output, "tract_core_silu", op.inputs[0])
    else:
        _silu_generic(ctx, op)


KHRONOS.add("silu", _silu_generic)


def _hard_swish_generic(ctx: EmitContext, op: Op) -> None:
    x = op.inputs[0]
    c = ctx.emit("hs_clamp", "clamp", ctx.call("add", x, 3.0), 0.0, 6.0)
    d = ctx.emit("hs_div", "div", c, 6.0)
    ctx.emit(op.output, "mul", x, d)


TRACT.add("hard_swish", _same("tract_core_hard_swish"))
KHRONOS.add("hard_swish", _hard_swish_generic)


def gelu_from_erf(ctx: EmitContext, op: Op, erf_op: str) -> None:
    x = op.inputs[0]
    if op.attrs.get("approximate", "none") == "tanh":
        x3 = ctx.emit("gelu_x3", "mul", ctx.call("mul", x, x), x)
        inner = ctx.emit("gelu_in", "mul", ctx.call("add", x, ctx.call("mul", x3, 0.044715)),
                         math.sqrt(2.0 / math.pi))
        t = ctx.emit("gelu_t", "tanh", inner)
    else:
        t = ctx.emit("gelu_erf", erf_op, ctx.call("mul", x, 1.0 / math.sqrt(2.0)))
    h = ctx.emit("gelu_h", "mul", ctx.call("add", t, 1.0), 0.5)
    ctx.emit(op.output, "mul", x, h)


@TRACT.emitter("gelu")
def gelu_tract(ctx: EmitContext, op: Op) -> None:
    if op.attrs.get("approximate", "none") == "tanh" and ctx.target.at_least("0.23.0"):
        ctx.emit(op.output, "tract_core_gelu_approx", op.inputs[0], fast_impl=False)
    else:
        gelu_from_erf(ctx, op, "tract_core_erf")


@KHRONOS.emitter("gelu")
def gelu_khronos(ctx: EmitContext, op: Op) -> None:
    """Exact GELU through t2n_erf: the standard ``gelu`` fragment is a sigmoid approximation."""
    gelu_from_erf(ctx, op, ctx.use_fragment("t2n_erf"))


@KHRONOS.emitter("erf")
def erf_khronos(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, ctx.use_fragment("t2n_erf"), op.inputs[0])


@KHRONOS.emitter("xor")
def xor_khronos(ctx: EmitContext, op: Op) -> None:
    rank = op.output.rank
    a, b = (Raw(ctx.arg_at_rank(v, rank)) for v in op.inputs)
    ctx.emit(op.output, "ne", a, b)
