"""tract's emitters of the norm family (the forms both targets share are in
:mod:`t2n.backends.nnef.emit.norm`)."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable
from t2n.backends.nnef.emit.norm import rms_norm
from t2n.backends.tract.versions import tract_has
from t2n.ir import Op

TRACT = EmitterTable("norm/tract")


@TRACT.emitter("rms_norm")
def rms_norm_tract(ctx: EmitContext, op: Op) -> None:
    axes = list(op.attrs["axes"])
    if len(axes) == 1 and tract_has(ctx, "tract_core_rms_norm"):
        ctx.emit(op.output, "tract_core_rms_norm", op.inputs[0], axis=axes[0],
                 eps=float(op.attrs["eps"]))
    else:
        rms_norm(ctx, op)

