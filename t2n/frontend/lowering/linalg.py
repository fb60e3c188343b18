"""Matrix products: linear, matmul and its 2-D/batched forms, addmm."""

from __future__ import annotations

from t2n.frontend.context import LoweringContext
from t2n.frontend.helpers import squeeze, unsqueeze
from t2n.frontend.registry import RuleSet
from t2n.ir import Builder, Value

RULES = RuleSet("linalg")


def matmul(b: Builder, x: Value, y: Value, *, transpose_b: bool = False) -> Value:
    """torch.matmul semantics, including 1-D operands (promoted, then squeezed)."""
    squeeze_axes = []
    if x.rank == 1:
        x = unsqueeze(b, x, [0])
        squeeze_axes.append(-2)
    if y.rank == 1:
        y = unsqueeze(b, y, [1] if not transpose_b else [0])
        squeeze_axes.append(-1)
    out = b.op("matmul", x, y, transpose_a=False, transpose_b=transpose_b)
    return squeeze(b, out, [a % out.rank for a in squeeze_axes])


@RULES.rule("aten::matmul", "aten::mm", "aten::bmm")
def matmul_rule(ctx: LoweringContext) -> Value:
    x, y = ctx.promoted(ctx.raw(0), ctx.raw(1))
    return matmul(ctx.b, x, y)


@RULES.rule("aten::linear")
def linear(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    w = ctx.tensor(1, x.type.dtype)
    out = matmul(ctx.b, x, w, transpose_b=True)
    bias = ctx.optional_tensor(2, x.type.dtype)
    return ctx.b.op("add", out, bias) if bias is not None else out


@RULES.rule("aten::addmm", "aten::addbmm", "aten::baddbmm", "aten::addmv")
def addmm(ctx: LoweringContext) -> Value:
    bias, x, y = ctx.promoted(ctx.raw(0), ctx.raw(1), ctx.raw(2))
    prod = matmul(ctx.b, x, y)
    if ctx.kind == "aten::addbmm":
        prod = ctx.b.op("sum_reduce", prod, axes=(0,), keepdims=False)
    beta = ctx.const("beta") if ctx.has("beta") else 1
    alpha = ctx.const("alpha") if ctx.has("alpha") else 1
    dt = prod.type.dtype
    if alpha != 1:
        prod = ctx.b.op("mul", prod, ctx.as_value(alpha, dt))
    if beta == 0:
        return prod
    if beta != 1:
        bias = ctx.b.op("mul", bias, ctx.as_value(beta, dt))
    return ctx.b.op("add", bias, prod)
