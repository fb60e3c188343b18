"""Khronos NNEF's emitters of the block_quant family (the forms both targets share are in
:mod:`t2n.backends.nnef.emit.block_quant`)."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable
from t2n.backends.nnef.emit.block_quant import q4_0_data
from t2n.ir import Op
from t2n.quant.q4_0 import as_float, is_q4_0

KHRONOS = EmitterTable("block_quant/khronos")


@KHRONOS.emitter("variable")
def variable_khronos(ctx: EmitContext, op: Op) -> None:
    data = op.attrs["data"]
    if q4_0_data(data) is not None:
        ctx.unsupported(
            f"weight {op.attrs['label']!r} is Q4_0 (made by t2n.quantize), and Khronos NNEF has "
            f"no 4-bit block type: export to TractNNEF, or compile an unquantized copy of the model")
        data = as_float(data) if is_q4_0(data) else data
    ctx.variable_line(ctx.id(op.output), data, op.attrs["label"], op.output.type.dtype)

