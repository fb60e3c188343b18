"""Emitters for variables, casts and copies."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable
from t2n.ir import Op

COMMON = EmitterTable("core")


@COMMON.emitter("variable")
def variable(ctx: EmitContext, op: Op) -> None:
    ctx.variable_line(ctx.id(op.output), op.attrs["data"], op.attrs["label"], op.output.type.dtype)


@COMMON.emitter("identity")
def identity(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, "copy", op.inputs[0])

