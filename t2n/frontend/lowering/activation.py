"""Activation aten ops (``torch.nn`` activation modules and their functional forms).

Ops tract runs natively (relu, sigmoid, leaky_relu, silu, hard_swish, gelu) stay one
IR op; the others are built from element-wise IR ops here. ``Softmin`` and
``Softmax2d`` trace to ``neg``/``softmax`` and need no rule of their own.
Clamp-like activations (relu6, hardtanh…) use ``max``/``min``: a NaN input gives the
bound in tract (NaN in PyTorch), the price of one op per side.
"""

from __future__ import annotations

from t2n.frontend.context import LoweringContext
from t2n.frontend.helpers import dim_value
from t2n.frontend.lowering.elementwise import clamp_values, const, floating
from t2n.frontend.lowering.shape import slice_axis
from t2n.frontend.registry import RuleSet
from t2n.ir import Builder, DType, Value

RULES = RuleSet("activation")

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _arg(ctx: LoweringContext, key: str, default: float) -> float:
    return float(ctx.const(key)) if ctx.has(key) and not ctx.is_none(key) else default


@RULES.rule("aten::relu", "aten::relu_")
def relu(ctx: LoweringContext) -> Value:
    return ctx.b.op("relu", ctx.tensor(0))


@RULES.rule("aten::relu6", "aten::relu6_")
def relu6(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    return clamp_values(ctx, x, 0, 6, x.type.dtype)


@RULES.rule("aten::hardtanh", "aten::hardtanh_")
def hardtanh(ctx: LoweringContext) -> Value:
    """Clamp to [min_val, max_val] in x's dtype (integers stay integers)."""
    x = ctx.tensor(0)
    return clamp_values(ctx, x, _arg(ctx, "min_val", -1.0), _arg(ctx, "max_val", 1.0), x.type.dtype)


@RULES.rule("aten::leaky_relu", "aten::leaky_relu_")
def leaky_relu(ctx: LoweringContext) -> Value:
    return ctx.b.op("leaky_relu", ctx.tensor(0), alpha=_arg(ctx, "negative_slope", 0.01))


@RULES.rule("aten::rrelu", "aten::rrelu_")
def rrelu(ctx: LoweringContext) -> Value:
    """In eval mode, a leaky relu of slope (lower + upper) / 2; training mode is random."""
    if ctx.has("training") and ctx.bool("training"):
        raise ctx.unsupported("rrelu in training mode draws random slopes")
    slope = (_arg(ctx, "lower", 1.0 / 8.0) + _arg(ctx, "upper", 1.0 / 3.0)) / 2.0
    return ctx.b.op("leaky_relu", ctx.tensor(0), alpha=slope)


@RULES.rule("aten::prelu", "aten::_prelu_kernel")
def prelu(ctx: LoweringContext) -> Value:
    """x where x >= 0, else weight * x; a weight of C values applies along axis 1."""
    x, w = ctx.tensor(0), ctx.tensor(1)
    w = ctx.b.cast(w, x.type.dtype)
    if w.rank == 1 and w.type.shape[0] == 1:
        w = ctx.b.op("reshape", w, ctx.b.ints([]))
    elif w.rank == 1 and x.rank > 2:
        w = ctx.b.op("reshape", w, ctx.b.ints([-1] + [1] * (x.rank - 2)))
    keep = ctx.b.op("ge", x, const(ctx.b, 0.0, x))
    return ctx.b.op("select", keep, x, ctx.b.op("mul", w, x))


@RULES.rule("aten::elu", "aten::elu_")
def elu(ctx: LoweringContext) -> Value:
    return ctx.b.op("elu", ctx.tensor(0), alpha=_arg(ctx, "alpha", 1.0),
                    scale=_arg(ctx, "scale", 1.0), input_scale=_arg(ctx, "input_scale", 1.0))


@RULES.rule("aten::selu", "aten::selu_")
def selu(ctx: LoweringContext) -> Value:
    return ctx.b.op("elu", ctx.tensor(0), alpha=SELU_ALPHA, scale=SELU_SCALE, input_scale=1.0)


@RULES.rule("aten::celu", "aten::celu_")
def celu(ctx: LoweringContext) -> Value:
    """x if x > 0 else alpha * (exp(x / alpha) - 1)."""
    alpha = _arg(ctx, "alpha", 1.0)
    return ctx.b.op("elu", ctx.tensor(0), alpha=alpha, scale=1.0, input_scale=1.0 / alpha)


@RULES.rule("aten::gelu", "aten::gelu_")
def gelu(ctx: LoweringContext) -> Value:
    approx = ctx.const("approximate") if ctx.has("approximate") else "none"
    return ctx.b.op("gelu", ctx.tensor(0), approximate=str(approx))


@RULES.rule("aten::silu", "aten::silu_")
def silu(ctx: LoweringContext) -> Value:
    return ctx.b.op("silu", floating(ctx.b, ctx.tensor(0)))


@RULES.rule("aten::mish", "aten::mish_")
def mish(ctx: LoweringContext) -> Value:
    """x * tanh(softplus(x)), with the overflow-free softplus."""
    x = ctx.tensor(0)
    return ctx.b.op("mul", x, ctx.b.op("tanh", ctx.b.op("softplus", x)))


@RULES.rule("aten::hardswish", "aten::hardswish_")
def hardswish(ctx: LoweringContext) -> Value:
    return ctx.b.op("hard_swish", ctx.tensor(0))


@RULES.rule("aten::hardsigmoid", "aten::hardsigmoid_")
def hardsigmoid(ctx: LoweringContext) -> Value:
    """min(max(x + 3, 0), 6) / 6, PyTorch's own order of operations."""
    x = ctx.tensor(0)
    shifted = ctx.b.op("add", x, const(ctx.b, 3.0, x))
    return ctx.b.op("div", clamp_values(ctx, shifted, 0.0, 6.0, x.type.dtype), const(ctx.b, 6.0, x))


@RULES.rule("aten::hardshrink")
def hardshrink(ctx: LoweringContext) -> Value:
    """0 where |x| <= lambd, else x (a NaN stays NaN)."""
    x = ctx.tensor(0)
    lambd = _arg(ctx, "lambd", 0.5)
    inside = ctx.b.op("le", ctx.b.op("abs", x), const(ctx.b, lambd, x))
    return ctx.b.op("select", inside, const(ctx.b, 0.0, x), x)


@RULES.rule("aten::softshrink")
def softshrink(ctx: LoweringContext) -> Value:
    """x - clamp(x, -lambd, lambd): x ∓ lambd outside the band, 0 inside."""
    x = ctx.tensor(0)
    lambd = _arg(ctx, "lambd", 0.5)
    return ctx.b.op("sub", x, clamp_values(ctx, x, -lambd, lambd, x.type.dtype))


@RULES.rule("aten::softplus")
def softplus(ctx: LoweringContext) -> Value:
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (as PyTorch)."""
    x = ctx.tensor(0)
    beta, threshold = _arg(ctx, "beta", 1.0), _arg(ctx, "threshold", 20.0)
    bx = x if beta == 1.0 else ctx.b.op("mul", x, const(ctx.b, beta, x))
    sp = ctx.b.op("softplus", bx)
    if beta != 1.0:
        sp = ctx.b.op("div", sp, const(ctx.b, beta, x))
    linear = ctx.b.op("gt", bx, const(ctx.b, threshold, x))
    return ctx.b.op("select", linear, x, sp)


@RULES.rule("aten::log_sigmoid")
def log_sigmoid(ctx: LoweringContext) -> Value:
    """-softplus(-x): stable for large |x| (log(sigmoid(x)) underflows to -inf)."""
    b: Builder = ctx.b
    return b.op("neg", b.op("softplus", b.op("neg", floating(b, ctx.tensor(0)))))


@RULES.rule("aten::threshold", "aten::threshold_")
def threshold(ctx: LoweringContext) -> Value:
    """x where x > threshold, else value."""
    x = ctx.tensor(0)
    th, value = ctx.const(1), ctx.const(2)
    return ctx.b.op("select", ctx.b.op("gt", x, ctx.as_value(th, x.type.dtype)), x,
                    ctx.as_value(value, x.type.dtype))


@RULES.rule("aten::glu")
def glu(ctx: LoweringContext) -> Value:
    """First half * sigmoid(second half) along ``dim``; the halves follow the axis size
    in the graph, so a dynamic axis keeps working."""
    x = ctx.tensor(0)
    axis = ctx.axis(1, x.rank) if ctx.n_inputs > 1 else x.rank - 1
    b = ctx.b
    half = b.op("div", dim_value(b, x, axis), b.const(2, DType.I64))
    first = slice_axis(b, x, axis, 0, half)
    second = slice_axis(b, x, axis, half, None)
    return b.op("mul", first, b.op("sigmoid", second))


@RULES.rule("aten::softmin")
def softmin(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    if not x.type.dtype.is_float:
        x = ctx.b.cast(x, DType.F32)
    return ctx.b.op("softmax", ctx.b.op("neg", x), axes=(ctx.axis(1, x.rank),))
