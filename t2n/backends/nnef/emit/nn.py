"""Emitters for matmul, convolution, pooling and softmax."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.backends.nnef.emit.block_quant import is_q4_0_operand
from t2n.backends.nnef.emit.recurrence import after_recurrence
from t2n.backends.nnef.versions import AVG_POOL_CONSTANT_BORDER, tract_has
from t2n.ir import Dim, Op, Value

COMMON = EmitterTable("nn")
TRACT = EmitterTable("nn/tract")


@COMMON.emitter("matmul")
def matmul(ctx: EmitContext, op: Op) -> None:
    """NNEF matmul needs equal ranks: lower-rank operands get leading unit axes."""
    a, b = op.inputs
    rank = max(a.rank, b.rank)
    ctx.emit(op.output, "matmul", Raw(ctx.arg_at_rank(a, rank)), Raw(ctx.arg_at_rank(b, rank)),
             transposeA=bool(op.attrs.get("transpose_a", False)),
             transposeB=bool(op.attrs.get("transpose_b", False)))


@TRACT.emitter("matmul")
def matmul_tract(ctx: EmitContext, op: Op) -> None:
    """``x[..., K] @ W`` with a 2-D ``W`` (every linear layer) is written as a 2-D matmul
    between reshapes: tract 0.23.9 fails to load the rank-lifted form when ``x`` comes
    from a window partition or a broadcast (its EinSum declutter), and the 2-D form is
    what it runs fastest anyway."""
    a, b = op.inputs
    if a.rank <= 2 or b.rank != 2 or op.attrs.get("transpose_a", False):
        matmul(ctx, op)
        return
    p = a.producer
    if p is not None and p.kind == "expand" and p.inputs[0].rank == a.rank and \
            p.inputs[0].type.shape[-1] == a.type.shape[-1]:
        # matmul(broadcast(x), W) = broadcast(matmul(x, W)): computed once per distinct
        # row, and tract fails to load the other order (it substitutes the broadcast away)
        small = _flat_matmul(ctx, op, p.inputs[0], b)
        ctx.emit(op.output, "tract_core_broadcast", Raw(small), shape=list(op.output.type.shape))
        return
    # (a Q4_0 weight there is written in float: emit/block_quant.py)
    unit_batch = after_recurrence(ctx.graph, a) and not is_q4_0_operand(ctx.graph, b)
    ctx.emit(op.output, "reshape", Raw(_flat_matmul(ctx, op, a, b, reshape_back=False, unit_batch=unit_batch)),
             shape=list(op.output.type.shape))


def _flat_matmul(ctx: EmitContext, op: Op, a: Value, b: Value, reshape_back: bool = True,
                 unit_batch: bool = False) -> str:
    """``a[..., K] @ b`` as a 2-D matmul; reshaped back to ``a``'s leading axes.

    ``unit_batch``: as a rank-3 matmul with a leading unit axis instead. tract 0.23.9's
    optimizer never finishes loading the 2-D form when the rows it merges come from
    recurrent loops over both axes of a map (bidirectional LSTMs over the rows and the
    columns, joined by a concat: sequencer models); the unit axis keeps it from pushing
    that merge into the loops, and the form is as fast."""
    lead = list(a.type.shape[:-1])
    rows: Dim = 1
    for d in lead:
        rows = rows * d
    if unit_batch:
        flat = ctx.emit(f"{a.name}_3d", "reshape", a, shape=[1, rows, a.type.shape[-1]])
        w = ctx.emit(f"{b.name}_3d", "unsqueeze", b, axes=[0])
        prod = ctx.emit(f"{op.output.name}_3d", "matmul", Raw(flat), Raw(w), transposeA=False,
                        transposeB=bool(op.attrs.get("transpose_b", False)))
    else:
        flat = ctx.emit(f"{a.name}_2d", "reshape", a, shape=[rows, a.type.shape[-1]])
        prod = ctx.emit(f"{op.output.name}_2d", "matmul", Raw(flat), b, transposeA=False,
                        transposeB=bool(op.attrs.get("transpose_b", False)))
    if not reshape_back:
        return prod
    cols = b.type.shape[0] if op.attrs.get("transpose_b", False) else b.type.shape[1]
    return ctx.emit(f"{op.output.name}_nd", "reshape", Raw(prod), shape=lead + [cols])


def _bias(ctx: EmitContext, op: Op) -> Raw | float:
    if len(op.inputs) < 3:
        return 0.0
    return Raw(ctx.emit(f"{op.inputs[2].name}_1c", "unsqueeze", op.inputs[2], axes=[0]))


def _pairs(pads: object) -> list[tuple[int, int]]:
    return [(int(p[0]), int(p[1])) for p in pads]  # type: ignore[attr-defined]


@COMMON.emitter("conv")
def conv(ctx: EmitContext, op: Op) -> None:
    x, w = op.inputs[:2]
    ctx.emit(op.output, "conv", x, w, _bias(ctx, op), border="constant",
             padding=_pairs(op.attrs["padding"]), stride=list(op.attrs["stride"]),
             dilation=list(op.attrs["dilation"]), groups=int(op.attrs["groups"]))


@COMMON.emitter("deconv")
def deconv(ctx: EmitContext, op: Op) -> None:
    x, w = op.inputs[:2]
    out_shape = list(op.output.type.shape)
    ctx.emit(op.output, "deconv", x, w, _bias(ctx, op), border="constant",
             padding=_pairs(op.attrs["padding"]), stride=list(op.attrs["stride"]),
             dilation=list(op.attrs["dilation"]), output_shape=out_shape,
             groups=int(op.attrs.get("groups", 1)))


@TRACT.emitter("deconv")
def deconv_tract(ctx: EmitContext, op: Op) -> None:
    """tract reads a transposed-convolution filter as [O, C/groups, k…] (PyTorch's, and
    the IR's, is [C, O/groups, k…]): the filter is regrouped in the graph, where tract
    folds it once at load time, instead of copying the weight at export. No
    ``output_shape``: tract reads it only as concrete integers (a symbolic batch or
    length fails to load), and the lowering's explicit crop already fixes the size."""
    x, w = op.inputs[:2]
    g = int(op.attrs.get("groups", 1))
    c, og = (int(d) for d in w.type.shape[:2])  # type: ignore[call-overload]
    ks = [int(d) for d in w.type.shape[2:]]  # type: ignore[call-overload]
    spatial = list(range(3, 3 + len(ks)))
    grouped = ctx.emit(f"{w.name}_g", "reshape", w, shape=[g, c // g, og] + ks)
    swapped = ctx.emit(f"{w.name}_t", "transpose", Raw(grouped), axes=[0, 2, 1] + spatial)
    filt = ctx.emit(f"{w.name}_oi", "reshape", Raw(swapped), shape=[g * og, c // g] + ks)
    ctx.emit(op.output, "deconv", x, Raw(filt), _bias(ctx, op), border="constant",
             padding=_pairs(op.attrs["padding"]), stride=list(op.attrs["stride"]),
             dilation=list(op.attrs["dilation"]), groups=g)


def _pool(ctx: EmitContext, op: Op) -> None:
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
    padding = [(0, 0)] * lead + _pairs(op.attrs["padding"])
    if border == "constant" and any(pair != (0, 0) for pair in padding) and \
            not tract_has(ctx, AVG_POOL_CONSTANT_BORDER):
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


COMMON.add("max_pool", _pool)
COMMON.add("avg_pool", _pool)


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
