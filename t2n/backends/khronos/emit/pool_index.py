"""Khronos NNEF's emitters of the pool_index family (the forms both targets share are in
:mod:`t2n.backends.nnef.emit.pool_index`)."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable
from t2n.backends.nnef.emit.pool_index import emit_pool, index_is_read
from t2n.ir import Op

KHRONOS = EmitterTable("pool_index/khronos")


@KHRONOS.emitter("max_pool_with_index")
def max_pool_with_index_khronos(ctx: EmitContext, op: Op) -> None:
    if index_is_read(ctx, op):
        ctx.unsupported(
            "the indices of a max pool (return_indices=True) have no standard NNEF form: "
            "standard argmax_pool does not define PyTorch's plane index; export to TractNNEF, "
            "or drop the indices")
        return
    emit_pool(ctx, op, False)


@KHRONOS.emitter("unpool_scatter")
def unpool_scatter_khronos(ctx: EmitContext, op: Op) -> None:
    ctx.unsupported("max_unpool writes values at computed positions, and standard NNEF has no "
                    "scatter (its desample does not take PyTorch's plane index); export to TractNNEF")

