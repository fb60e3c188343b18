"""Emitters for matmul, convolution, pooling and softmax."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.ir import Op, Value

COMMON = EmitterTable("nn")


@COMMON.emitter("matmul")
def matmul(ctx: EmitContext, op: Op) -> None:
    """NNEF matmul needs equal ranks: lower-rank operands get leading unit axes."""
    a, b = op.inputs
    rank = max(a.rank, b.rank)
    ctx.emit(op.output, "matmul", Raw(ctx.arg_at_rank(a, rank)), Raw(ctx.arg_at_rank(b, rank)),
             transposeA=bool(op.attrs.get("transpose_a", False)),
             transposeB=bool(op.attrs.get("transpose_b", False)))


def bias_operand(ctx: EmitContext, op: Op) -> Raw | float:
    if len(op.inputs) < 3:
        return 0.0
    return Raw(ctx.emit(f"{op.inputs[2].name}_1c", "unsqueeze", op.inputs[2], axes=[0]))


def pad_pairs(pads: object) -> list[tuple[int, int]]:
    return [(int(p[0]), int(p[1])) for p in pads]  # type: ignore[attr-defined]


@COMMON.emitter("conv")
def conv(ctx: EmitContext, op: Op) -> None:
    x, w = op.inputs[:2]
    ctx.emit(op.output, "conv", x, w, bias_operand(ctx, op), border="constant",
             padding=pad_pairs(op.attrs["padding"]), stride=list(op.attrs["stride"]),
             dilation=list(op.attrs["dilation"]), groups=int(op.attrs["groups"]))


@COMMON.emitter("deconv")
def deconv(ctx: EmitContext, op: Op) -> None:
    x, w = op.inputs[:2]
    out_shape = list(op.output.type.shape)
    ctx.emit(op.output, "deconv", x, w, bias_operand(ctx, op), border="constant",
             padding=pad_pairs(op.attrs["padding"]), stride=list(op.attrs["stride"]),
             dilation=list(op.attrs["dilation"]), output_shape=out_shape,
             groups=int(op.attrs.get("groups", 1)))


def pool(ctx: EmitContext, op: Op, *, pad_apart: bool = False) -> None:
    """``max_pool``/``avg_pool`` over the op's window axes (at least N and C before them,
    which tract wants); ``pad_apart``: an explicit zero ``pad`` first, then a pool with no
    padding (for engines that leave a constant border out of the divisor)."""
    x = op.inputs[0]
    k = list(op.attrs["kernel"])
    lead = x.rank - len(k)
    if op.kind == "max_pool":
        border = "ignore"
    else:
        border = "constant" if op.attrs.get("count_include_pad", True) else "ignore"
    src: Value | Raw = x
    missing = max(0, 2 - lead)  # tract wants at least N and C before the window axes
    if missing:
        src = Raw(ctx.emit(f"{x.name}_nc", "unsqueeze", x, axes=list(range(missing))))
        lead += missing
    padding = [(0, 0)] * lead + pad_pairs(op.attrs["padding"])
    if border == "constant" and any(pair != (0, 0) for pair in padding) and pad_apart:
        src = Raw(ctx.emit(f"{x.name}_padded", "pad", src, padding=padding, border="constant", value=0.0))
        padding = [(0, 0)] * len(padding)
    attrs = dict(size=[1] * lead + k, border=border,
                 padding=padding,
                 stride=[1] * lead + list(op.attrs["stride"]),
                 dilation=[1] * lead + list(op.attrs["dilation"]))
    if not missing:
        ctx.emit(op.output, op.kind, src, **attrs)
        return
    pooled = ctx.emit(f"{op.output.name}_nc", op.kind, src, **attrs)
    ctx.emit(op.output, "squeeze", Raw(pooled), axes=list(range(missing)))


COMMON.add("max_pool", pool)
COMMON.add("avg_pool", pool)


@COMMON.emitter("softmax")
def softmax(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, "softmax", op.inputs[0], axes=list(op.attrs["axes"]))


@COMMON.emitter("log_softmax")
def log_softmax(ctx: EmitContext, op: Op) -> None:
    """x - max - log(sum(exp(x - max))), the stable form."""
    x = op.inputs[0]
    axes = list(op.attrs["axes"])
    m = ctx.emit("lsm_max", "max_reduce", x, axes=axes)
    sh = ctx.emit("lsm_shift", "sub", x, Raw(m))
    s = ctx.emit("lsm_sum", "sum_reduce", Raw(ctx.call("exp", Raw(sh))), axes=axes)
    ctx.emit(op.output, "sub", Raw(sh), Raw(ctx.call("log", Raw(s))))

