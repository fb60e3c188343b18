"""Emitters for fused normalization ops in standard operations (tract writes its
``tract_core_rms_norm`` where it is exact: :mod:`t2n.backends.tract.emit.norm`)."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.ir import Op

COMMON = EmitterTable("norm")


@COMMON.emitter("rms_norm")
def rms_norm(ctx: EmitContext, op: Op) -> None:
    x = op.inputs[0]
    sq = ctx.emit("rms_sq", "mul", x, x)
    ms = ctx.emit("rms_mean", "mean_reduce", Raw(sq), axes=list(op.attrs["axes"]))
    inv = ctx.emit("rms_inv", "rsqrt", Raw(ctx.call("add", Raw(ms), float(op.attrs["eps"]))))
    ctx.emit(op.output, "mul", x, Raw(inv))

