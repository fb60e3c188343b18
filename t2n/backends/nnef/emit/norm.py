"""Emitters for fused normalization ops: tract's ``tract_core_rms_norm`` where it is
exact (one axis, tract 0.23+), the standard-op composition elsewhere."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.backends.nnef.versions import tract_has
from t2n.ir import Op

COMMON = EmitterTable("norm")
TRACT = EmitterTable("norm/tract")


@COMMON.emitter("rms_norm")
def rms_norm(ctx: EmitContext, op: Op) -> None:
    x = op.inputs[0]
    sq = ctx.emit("rms_sq", "mul", x, x)
    ms = ctx.emit("rms_mean", "mean_reduce", Raw(sq), axes=list(op.attrs["axes"]))
    inv = ctx.emit("rms_inv", "rsqrt", Raw(ctx.call("add", Raw(ms), float(op.attrs["eps"]))))
    ctx.emit(op.output, "mul", x, Raw(inv))


@TRACT.emitter("rms_norm")
def rms_norm_tract(ctx: EmitContext, op: Op) -> None:
    axes = list(op.attrs["axes"])
    if len(axes) == 1 and tract_has(ctx, "tract_core_rms_norm"):
        ctx.emit(op.output, "tract_core_rms_norm", op.inputs[0], axis=axes[0],
                 eps=float(op.attrs["eps"]))
    else:
        rms_norm(ctx, op)
