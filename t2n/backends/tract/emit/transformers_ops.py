"""tract's emitters of the transformers_ops family (the forms both targets share are in
:mod:`t2n.backends.nnef.emit.transformers_ops`)."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable
from t2n.backends.nnef.emit.transformers_ops import apply_rope
from t2n.backends.tract.versions import require, tract_has
from t2n.ir import DType, Op
from t2n.ir.dims import Sym

TRACT = EmitterTable("transformers/tract")


APPLY_ROPE = "tract_transformers_apply_rope"


DYN_KV_CACHE = "tract_transformers_dyn_kv_cache"
QUANTIZED_KV_CACHE = "tract_transformers_quantized_dyn_kv_cache"


@TRACT.emitter("apply_rope")
def apply_rope_tract(ctx: EmitContext, op: Op) -> None:
    if not tract_has(ctx, APPLY_ROPE):
        apply_rope(ctx, op)
        return
    ctx.use_registry("tract_transformers")
    ctx.emit(op.output, APPLY_ROPE, *op.inputs)


@TRACT.emitter("kv_cache_append")
def kv_cache_append_tract(ctx: EmitContext, op: Op) -> None:
    """``tract_transformers_dyn_kv_cache``: tract keeps the cache in the model's state and
    binds the ``past`` symbol to its length at each run (0 before the first);
    ``tract_transformers_quantized_dyn_kv_cache`` when ``bits`` is set."""
    bits = int(op.attrs.get("bits", 0))
    name = QUANTIZED_KV_CACHE if bits else DYN_KV_CACHE
    if not require(ctx, name, "a quantized stateful KV cache" if bits else "a stateful KV cache"):
        return
    ctx.use_registry("tract_transformers")
    x = op.inputs[0]
    dtype = x.type.dtype
    written = ctx.target.bf16_as if dtype is DType.BF16 else dtype  # type: ignore[attr-defined]
    axis = int(op.attrs["axis"])
    past = list(x.type.shape)
    past[axis] = Sym(str(op.attrs["past"]))
    # tract's quantized cache keeps the first tokens exact, then keys in blocks of 32
    # tokens with a scale per channel and values with a scale per token
    quantized = {"bits": bits, "per_channel": int(bool(op.attrs["per_channel"]))} if bits else {}
    ctx.emit(op.output, name, x, name=str(op.attrs["name"]), axis=axis, **quantized,
             datum_type=written.value, past_sequence_shape=past, input_sequence_shape=list(x.type.shape))

