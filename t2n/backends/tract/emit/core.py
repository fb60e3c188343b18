"""tract's emitters of the core family (the forms both targets share are in
:mod:`t2n.backends.nnef.emit.core`)."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable
from t2n.ir import DType, Op

TRACT = EmitterTable("core/tract")


@TRACT.emitter("cast")
def cast_tract(ctx: EmitContext, op: Op) -> None:
    to = op.attrs["to"]
    if to is DType.BF16:
        to = ctx.target.bf16_as
    ctx.emit(op.output, "tract_core_cast", op.inputs[0], to=to.value)

