"""Normalization layers at inference: batch norm as a per-channel affine map."""

from __future__ import annotations

from t2n.frontend.context import LoweringContext
from t2n.frontend.helpers import reshape
from t2n.frontend.registry import RuleSet
from t2n.ir import Value

RULES = RuleSet("norm")


@RULES.rule("aten::batch_norm", "aten::_native_batch_norm_legit_no_training")
def batch_norm(ctx: LoweringContext) -> Value:
    """y = x * scale + shift with scale = w / sqrt(var + eps), shift = b - mean * scale.
    With constant statistics the scale and shift fold into two small constants."""
    x = ctx.tensor(0)
    dt = x.type.dtype
    w = ctx.optional_tensor(1, dt)
    bias = ctx.optional_tensor(2, dt)
    mean = ctx.optional_tensor(3, dt)
    var = ctx.optional_tensor(4, dt)
    if ctx.kind == "aten::batch_norm":
        if ctx.bool(5) and (mean is None or var is None):
            raise ctx.unsupported("batch norm without running statistics (training mode)")
        eps = ctx.float(7)
    else:
        eps = ctx.float(6)
    if mean is None or var is None:
        raise ctx.unsupported("batch norm without running statistics")
    b = ctx.b
    inv = b.op("rsqrt", b.op("add", var, ctx.as_value(eps, dt)))
    scale = b.op("mul", inv, w) if w is not None else inv
    shift = b.op("neg", b.op("mul", mean, scale))
    if bias is not None:
        shift = b.op("add", shift, bias)
    c = x.type.shape[1] if x.rank > 1 else x.type.shape[0]
    bshape = [c] + [1] * (x.rank - 2) if x.rank > 1 else [c]
    scale = reshape(b, scale, bshape)
    shift = reshape(b, shift, bshape)
    return b.op("add", b.op("mul", x, scale), shift)
