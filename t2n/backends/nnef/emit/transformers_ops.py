"""Emitters of the transformer ops of :mod:`t2n.ir.ops.transformers`: tract's
``tract_transformers_apply_rope`` and ``tract_transformers_dyn_kv_cache`` where the
target version has them; rotary embedding in standard operations elsewhere. A stateful
cache has no standard form: exporting one for Khronos NNEF or an older tract is refused,
naming the version that has it."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.backends.nnef.versions import require, tract_has
from t2n.ir import DType, Op
from t2n.ir.dims import Sym

COMMON = EmitterTable("transformers")
TRACT = EmitterTable("transformers/tract")

APPLY_ROPE = "tract_transformers_apply_rope"
DYN_KV_CACHE = "tract_transformers_dyn_kv_cache"
QUANTIZED_KV_CACHE = "tract_transformers_quantized_dyn_kv_cache"


@COMMON.emitter("apply_rope")
def apply_rope(ctx: EmitContext, op: Op) -> None:
    """``x * cos + concat([-x[h:], x[:h]]) * sin`` on the last axis."""
    x, cos, sin = op.inputs
    axis, size = x.rank - 1, int(x.type.shape[-1])
    first = ctx.emit("rope_first", "slice", x, axes=[axis], begin=[0], end=[size // 2])
    second = ctx.emit("rope_second", "slice", x, axes=[axis], begin=[size // 2], end=[size])
    rotated = ctx.emit("rope_rotated", "concat", Raw(f"[{ctx.call('neg', Raw(second))}, {first}]"), axis=axis)
    with_cos = ctx.emit("rope_cos", "mul", x, cos)
    with_sin = ctx.emit("rope_sin", "mul", Raw(rotated), sin)
    ctx.emit(op.output, "add", Raw(with_cos), Raw(with_sin))


@TRACT.emitter("apply_rope")
def apply_rope_tract(ctx: EmitContext, op: Op) -> None:
    if not tract_has(ctx, APPLY_ROPE):
        apply_rope(ctx, op)
        return
    ctx.use_registry("tract_transformers")
    ctx.emit(op.output, APPLY_ROPE, *op.inputs)


@COMMON.emitter("kv_cache_append")
def kv_cache_append(ctx: EmitContext, op: Op) -> None:
    ctx.unsupported("a stateful KV cache is a tract operation (tract_transformers_dyn_kv_cache); "
                    "export for TractNNEF, or with the cache as explicit inputs and outputs")


@TRACT.emitter("kv_cache_append")
def kv_cache_append_tract(ctx: EmitContext, op: Op) -> None:
    """``tract_transformers_dyn_kv_cache``: tract keeps the cache in the model's state and
    binds the ``past`` symbol to its length at each run (0 before the first)."""
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
