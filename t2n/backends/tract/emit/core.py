"""tract's emitters of the core family (the forms both targets share are in
:mod:`t2n.backends.nnef.emit.core`)."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.ir import DType, Op

TRACT = EmitterTable("core/tract")


@TRACT.emitter("cast")
def cast_tract(ctx: EmitContext, op: Op) -> None:
    """A float cast to an unsigned or 8/16-bit type goes through i64: PyTorch's CPU
    kernels truncate to a wide signed integer and wrap (``-3.5`` → 253 as uint8, 300.0
    → 44 as int8), where tract would saturate."""
    to = op.attrs["to"]
    if to is DType.BF16:
        to = ctx.target.bf16_as
    x = op.inputs[0]
    if x.type.dtype.is_float and to.is_int and (not to.is_signed or to.bits < 32):
        ctx.emit(op.output, "tract_core_cast", Raw(ctx.call("tract_core_cast", x, to="i64")), to=to.value)
        return
    ctx.emit(op.output, "tract_core_cast", x, to=to.value)

