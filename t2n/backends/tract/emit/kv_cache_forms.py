"""tract's sliding-window cache and attention (:mod:`t2n.ir.ops.kv_cache_forms`): one
``tract_transformers_window_kv_sdpa``; it has no standard form (it keeps state: Khronos
refuses it, ``t2n.backends.khronos.refusals``)."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable
from t2n.backends.tract.versions import require
from t2n.ir import Op

TRACT = EmitterTable("kv_cache_forms/tract")

WINDOW_KV_SDPA = "tract_transformers_window_kv_sdpa"


@TRACT.emitter("window_kv_sdpa")
def window_kv_sdpa_tract(ctx: EmitContext, op: Op) -> None:
    if not require(ctx, WINDOW_KV_SDPA, "a sliding-window KV cache"):
        return
    ctx.use_registry("tract_transformers")
    ctx.emit(op.output, WINDOW_KV_SDPA, *op.inputs, axis=int(op.attrs["axis"]), window=int(op.attrs["window"]),
             scale=float(op.attrs["scale"]))
