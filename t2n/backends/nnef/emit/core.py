"""Emitters for variables, casts and copies."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.ir import DType, Op

COMMON = EmitterTable("core")
TRACT = EmitterTable("core/tract")
KHRONOS = EmitterTable("core/khronos")


@COMMON.emitter("variable")
def variable(ctx: EmitContext, op: Op) -> None:
    ctx.variable_line(ctx.id(op.output), op.attrs["data"], op.attrs["label"], op.output.type.dtype)


@COMMON.emitter("identity")
def identity(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, "copy", op.inputs[0])


@TRACT.emitter("cast")
def cast_tract(ctx: EmitContext, op: Op) -> None:
    to = op.attrs["to"]
    if to is DType.BF16:
        to = ctx.target.bf16_as
    ctx.emit(op.output, "tract_core_cast", op.inputs[0], to=to.value)


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
