"""tract's emitters of the nn family (the forms both targets share are in
:mod:`t2n.backends.nnef.emit.nn`)."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.backends.nnef.emit.nn import bias_operand, matmul, pad_pairs, pool
from t2n.backends.tract.emit.block_quant import is_q4_0_operand
from t2n.backends.tract.emit.recurrence import after_recurrence
from t2n.backends.tract.versions import AVG_POOL_CONSTANT_BORDER, tract_has
from t2n.ir import Dim, Op, Value

TRACT = EmitterTable("nn/tract")


@TRACT.emitter("matmul")
def matmul_tract(ctx: EmitContext, op: Op) -> None:
    """``x[..., K] @ W`` with a 2-D ``W`` (every linear layer): for a rank-3 ``x`` NNEF's
    ``linear`` with ``W`` lifted to rank 3 (what tract runs fastest), else a 2-D matmul
    between reshapes: tract 0.23.9 fails to load the rank-lifted form when ``x`` comes
    from a window partition or a broadcast (its EinSum declutter). After a recurrent
    loop, a unit-batch rank-3 matmul (see :func:`_flat_matmul`)."""
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
    if after_recurrence(ctx.graph, a):
        # (a Q4_0 weight there is written in float: emit/block_quant.py)
        unit_batch = not is_q4_0_operand(ctx.graph, b)
        ctx.emit(op.output, "reshape", Raw(_flat_matmul(ctx, op, a, b, reshape_back=False, unit_batch=unit_batch)),
                 shape=list(op.output.type.shape))
        return
    if op.attrs.get("transpose_b", False) and a.rank == 3 and not is_q4_0_operand(ctx.graph, b) \
            and not _reshapes_leading_axis(a):
        # a linear layer over [B, S, K] (a language model's): tract 0.23.9 runs NNEF's
        # linear of the weight lifted to rank 3 about 10 % faster in a prefill and 15 % in
        # a decode step than the 2-D matmul (rank 4, after a window partition, it fails to
        # load; a Q4_0 weight it reads only in the 2-D matmul)
        lifted = ctx.emit(f"{b.name}_r3", "unsqueeze", b, axes=[0])
        ctx.emit(op.output, "linear", a, Raw(lifted), 0.0)
        return
    ctx.emit(op.output, "reshape", Raw(_flat_matmul(ctx, op, a, b, reshape_back=False)),
             shape=list(op.output.type.shape))


def _reshapes_leading_axis(a: Value) -> bool:
    """Whether ``a`` comes from a reshape that merges or splits its leading axis (the
    frames of a video UNet's temporal transformer, [B, C, F, H, W] → [B·H·W, F, C]):
    tract 0.23.9's EinSum declutter moves that reshape into the rank-lifted ``linear``
    and applies it to the weight's unit axis too, which it cannot, and refuses to load
    the model. Unit axes dropped or added ahead of it are no such change (and the 2-D
    form fails to load when the reshape's input is a broadcast: SVD's text embedding)."""
    p = a.producer
    if p is None or p.kind != "reshape" or a.type.shape[0] == 1:
        return False
    carried = [d for d in p.inputs[0].type.shape if d != 1]
    return not carried or carried[0] != a.type.shape[0]


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
    ctx.emit(op.output, "deconv", x, Raw(filt), bias_operand(ctx, op), border="constant",
             padding=pad_pairs(op.attrs["padding"]), stride=list(op.attrs["stride"]),
             dilation=list(op.attrs["dilation"]), groups=g)


@TRACT.emitter("max_pool", "avg_pool")
def pool_tract(ctx: EmitContext, op: Op) -> None:
    """Before 0.23.6 tract leaves a constant border out of an average's divisor: the
    padding is written as a ``pad`` of zeros."""
    pool(ctx, op, pad_apart=not tract_has(ctx, AVG_POOL_CONSTANT_BORDER))
