"""tract's emitters of the sort family (topk): standard NNEF has no form for these
ops, so Khronos NNEF refuses them."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw, literal
from t2n.backends.tract.versions import require
from t2n.ir import Op

TRACT = EmitterTable("sort/tract")


@TRACT.emitter("topk")
def topk(ctx: EmitContext, op: Op) -> None:
    if not require(ctx, "tract_core_topk", "topk"):
        return
    k = ctx.call("tract_core_cast", Raw(literal(op.attrs["k"])), to="i64")
    values, indices = op.outputs
    ctx.assign([ctx.id(values), ctx.id(indices)],
               ctx.call("tract_core_topk", op.inputs[0], Raw(k), axis=int(op.attrs["axis"]),
                        largest=bool(op.attrs["largest"])))

