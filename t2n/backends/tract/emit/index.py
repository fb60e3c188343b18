"""tract's emitters of the index family (gather and scatter by index, grid sampling): standard NNEF has no form for these
ops, so Khronos NNEF refuses them."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.backends.tract.versions import SCATTER_REDUCTION, require
from t2n.ir import Op

TRACT = EmitterTable("index/tract")


_TRACT_REDUCTION = {"none": "none", "add": "add", "mul": "mul", "max": "max", "min": "min"}


@TRACT.emitter("gather_elements")
def gather_elements(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, "tract_core_gather_elements", op.inputs[0], Raw(ctx.arg(op.inputs[1])),
             axis=int(op.attrs["axis"]))


@TRACT.emitter("scatter_elements")
def scatter_elements(ctx: EmitContext, op: Op) -> None:
    if op.attrs.get("reduction", "none") != "none" and not require(ctx, SCATTER_REDUCTION, "a scatter with a reduction"):
        return
    ctx.emit(op.output, "tract_core_scatter_elements", op.inputs[0], Raw(ctx.arg(op.inputs[1])),
             op.inputs[2], axis=int(op.attrs["axis"]),
             reduction=_TRACT_REDUCTION[op.attrs.get("reduction", "none")])


@TRACT.emitter("scatter_nd")
def scatter_nd(ctx: EmitContext, op: Op) -> None:
    if op.attrs.get("reduction", "none") != "none" and not require(ctx, SCATTER_REDUCTION, "a scatter with a reduction"):
        return
    ctx.emit(op.output, "tract_core_scatter_nd", op.inputs[0], Raw(ctx.arg(op.inputs[1])),
             op.inputs[2], reduction=_TRACT_REDUCTION[op.attrs.get("reduction", "none")])


@TRACT.emitter("grid_sample")
def grid_sample(ctx: EmitContext, op: Op) -> None:
    if not require(ctx, "tract_core_grid_sample", "grid_sample"):
        return
    ctx.emit(op.output, "tract_core_grid_sample", op.inputs[0], op.inputs[1],
             mode=op.attrs["mode"], padding_mode=op.attrs["padding_mode"],
             align_corners=bool(op.attrs["align_corners"]))

