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
    values, indices = op.outputs
    axis = int(op.attrs["axis"])
    k = values.type.shape[axis]  # a sort's k is the axis' length
    if not isinstance(k, int):
        ctx.unsupported(
            f"a sort along a dynamic axis ({k}): tract's top-k takes the length of the axis as a "
            "value it cannot compute from a symbol when it runs; keep the tract target's "
            "dynamic-axis-sort pass (it writes such a sort with comparisons), or give this axis a "
            "static size (leave it out of dynamic_axes)")
        return
    count = ctx.call("tract_core_cast", Raw(literal(k)), to="i64")
    ctx.assign([ctx.id(values), ctx.id(indices)],
               ctx.call("tract_core_topk", op.inputs[0], Raw(count), axis=axis,
                        largest=bool(op.attrs["largest"])))

