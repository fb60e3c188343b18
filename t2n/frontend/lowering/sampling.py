"""Random draws (``torch.randn``, ``rand``, ``*_like``, ``normal``, ``x.normal_()``...) and
dropout in training mode: refused, or, with ``compile(..., sampling="inputs")``, the
graph input that stands for each draw (:mod:`t2n.frontend.sampling`)."""

from __future__ import annotations

from typing import Any

from t2n.frontend.context import LoweringContext
from t2n.frontend.helpers import from_tensor_data
from t2n.frontend.registry import RuleSet
from t2n.frontend.sampling import REFUSAL, SAMPLING_KINDS, UNRECORDED
from t2n.ir import Value
from t2n.ir.dims import is_data_symbol

RULES = RuleSet("sampling")


@RULES.rule(*sorted(SAMPLING_KINDS),
            notes="random draws: refused, or graph inputs given by the caller with compile(sampling=\"inputs\")")
def draw(ctx: LoweringContext) -> Value:
    """The graph input standing for this draw (the caller gives the noise)."""
    noise = ctx.lowering.noise_inputs
    if noise is None:
        raise ctx.unsupported(REFUSAL.format(op=ctx.kind))
    _refuse_data_sized(ctx)
    value = noise.get(ctx.draw_key())
    if value is None:
        raise ctx.unsupported(UNRECORDED.format(op=ctx.kind))
    source = _shape_source(ctx, value)
    if source is not None:
        ctx.lowering.graph.info.input_shapes_from[value.name] = source
    return value


def _shape_source(ctx: LoweringContext, value: Value) -> Value | None:
    """The size value the draw's shape is made from (its ``size`` argument, or the shape
    of the tensor it is drawn like), so that the input follows dynamic axes; None when
    none of them has the draw's shape."""
    if ctx.has("size") and not ctx.is_none("size"):
        candidates = [ctx.shape_tensor("size")]
    else:
        candidates = [ctx.b.op("shape_of", x) for x in (ctx.raw(i) for i in range(ctx.n_inputs))
                      if isinstance(x, Value) and x.rank == value.rank]
    for c in candidates:
        if c.known is not None and c.known.tolist() == list(value.type.shape):
            return c
    return None


def _refuse_data_sized(ctx: LoweringContext) -> None:
    """A draw whose size is computed from tensor data (``randn_like`` of a length-regulated
    sequence) cannot be a graph input: tract learns that size only while running."""
    tensors = [ctx.raw(i) for i in range(ctx.n_inputs)]
    data = any(isinstance(x, Value) and any(is_data_symbol(s) for s in x.symbols()) for x in tensors)
    if not data and ctx.has("size") and not ctx.is_none("size"):
        size = ctx.shape_tensor("size")
        data = size.known is None and from_tensor_data(size)
    if data:
        raise ctx.unsupported(
            f"{ctx.kind} draws a tensor whose size is computed from tensor data, and a graph input "
            "needs a size known when its values are given; draw the noise outside forward (at a "
            "maximum length) and pass it in, or split the model where the size is known")


@RULES.rule("aten::dropout", "aten::feature_dropout", "aten::alpha_dropout", "aten::feature_alpha_dropout",
            "aten::dropout_")
def dropout(ctx: LoweringContext) -> Any:
    """Identity in eval mode; ``F.dropout(x, p, training=True)`` (a prenet that always
    drops) draws a random mask: refused, naming what to do."""
    train = ctx.bool(2) if ctx.n_inputs > 2 else False
    p = ctx.float(1) if ctx.n_inputs > 1 else 0.0
    if train and p > 0:
        raise ctx.unsupported(
            f"{ctx.kind} with training=True draws a random mask inside the graph, which an artifact "
            "cannot reproduce; pass training=self.training (off when exported), or make the mask an "
            "argument of forward")
    return ctx.raw(0)
