"""Emitters of the transformer ops of :mod:`t2n.ir.ops.transformers`: tract's
``tract_transformers_apply_rope`` and ``tract_transformers_dyn_kv_cache`` where the
target version has them; rotary embedding in standard operations elsewhere. A stateful
cache has no standard form: exporting one for Khronos NNEF or an older tract is refused,
naming the version that has it."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.ir import Op

COMMON = EmitterTable("transformers")


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


@COMMON.emitter("kv_cache_append")
def kv_cache_append(ctx: EmitContext, op: Op) -> None:
    ctx.unsupported("a stateful KV cache is a tract operation (tract_transformers_dyn_kv_cache); "
                    "export for TractNNEF, or with the cache as explicit inputs and outputs")

