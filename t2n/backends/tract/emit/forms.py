"""tract emitters of tract's own IR ops (:mod:`t2n.backends.tract.ops`)."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable
from t2n.ir import Op

TRACT = EmitterTable("forms/tract")


@TRACT.emitter("tract_sdpa")
def emit_sdpa(ctx: EmitContext, op: Op) -> None:
    """``tract_transformers_sdpa`` (tract's transformers registry), accumulating in the
    inputs' type; the scale is always written (the frontend knows it)."""
    ctx.use_registry("tract_transformers")
    dt = op.inputs[0].type.dtype.value
    ctx.emit(op.output, "tract_transformers_sdpa", *op.inputs, datum_type=dt, acc_datum_type=dt,
             is_causal=False, scale=float(op.attrs["scale"]))


@TRACT.emitter("tract_debox")
def emit_debox(ctx: EmitContext, op: Op) -> None:
    """``debox`` with a window and stride of the factor of each axis (the form of NNEF's
    ``nearest_upsample``)."""
    rank = op.output.rank
    window = [int(f) for f in op.attrs["factors"]]
    ctx.emit(op.output, "debox", op.inputs[0], size=window, stride=window, padding=[(0, 0)] * rank,
             border="constant")
