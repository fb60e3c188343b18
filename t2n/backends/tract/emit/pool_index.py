"""tract's emitters of the pool_index family (the forms both targets share are in
:mod:`t2n.backends.nnef.emit.pool_index`)."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.backends.nnef.emit.pool_index import emit_pool, index_is_read
from t2n.ir import Op

TRACT = EmitterTable("pool_index/tract")


@TRACT.emitter("max_pool_with_index")
def max_pool_with_index(ctx: EmitContext, op: Op) -> None:
    emit_pool(ctx, op, index_is_read(ctx, op))


@TRACT.emitter("unpool_scatter")
def unpool_scatter(ctx: EmitContext, op: Op) -> None:
    """Values and indices flattened after the lead axes by ``reshape``'s
    ``axis_start``/``axis_count`` (no size written: tract need not prove that the
    values' and the indices' symbolic sizes agree), then tract's element scatter."""
    base, idx, x = op.inputs
    lead = int(op.attrs["lead"])
    span = dict(shape=[-1], axis_start=lead, axis_count=x.rank - lead)
    flat_idx = ctx.emit(f"{idx.name}_flat", "reshape", Raw(ctx.arg(idx)), **span)
    flat_x = ctx.emit(f"{x.name}_flat", "reshape", x, **span)
    ctx.emit(op.output, "tract_core_scatter_elements", base, Raw(flat_idx), Raw(flat_x), axis=lead,
             reduction="none")

