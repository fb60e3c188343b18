"""tract's emitter of ``tract_nearest_upsample`` (:mod:`t2n.backends.tract.ops`): NNEF's
``nearest_upsample``, which tract 0.23.9 loads as its own resize op and runs as one
kernel, the op its ONNX loader builds for a ``Resize`` by integer scales
(:mod:`t2n.backends.tract.passes.nearest_upsample` says when)."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable
from t2n.ir import Op

TRACT = EmitterTable("resize/tract")


@TRACT.emitter("tract_nearest_upsample")
def nearest_upsample(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, "nearest_upsample", op.inputs[0], factor=[int(f) for f in op.attrs["factors"]])
