"""Khronos NNEF's emitters of the core family (the forms both targets share are in
:mod:`t2n.backends.nnef.emit.core`)."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.ir import DType, Op

KHRONOS = EmitterTable("core/khronos")


@KHRONOS.emitter("cast")
def cast_khronos(ctx: EmitContext, op: Op) -> None:
    """Khronos types are scalar/integer/logical: casts within a family are copies."""
    x = op.inputs[0]
    src, dst = x.type.dtype, op.attrs["to"]
    if src.is_float == dst.is_float and (src is DType.BOOL) == (dst is DType.BOOL):
        ctx.emit(op.output, "copy", x)
    elif dst is DType.BOOL and src.is_float:
        ctx.emit(op.output, "ne", x, 0.0)
    elif dst is DType.BOOL:
        # Comparisons are defined on scalars only: compare the integers as reals.
        ctx.emit(op.output, "ne", Raw(ctx.emit("as_real", "cast<scalar>", x)), 0.0)
    elif src is DType.BOOL:
        ctx.emit(op.output, "select", x, 1.0 if dst.is_float else 1, 0.0 if dst.is_float else 0)
    else:
        ctx.emit(op.output, f"cast<{'scalar' if dst.is_float else 'integer'}>", x)

