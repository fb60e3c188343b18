"""Ops that real models trace and that fit no other family: weight normalization,
the ``native_*`` forms of dropout and normalizations, distances and similarities."""

from __future__ import annotations

import numpy as np

from t2n.frontend.context import LoweringContext, Poison
from t2n.frontend.lowering.norm import (
    affine,
    batch_stats_norm,
    per_channel,
    running_stats_norm,
    standardize,
)
from t2n.frontend.lowering.reduce import vector_norm
from t2n.frontend.registry import RuleSet
from t2n.ir import DType, Value

RULES = RuleSet("misc")


@RULES.rule("aten::_weight_norm")
def weight_norm(ctx: LoweringContext) -> Value:
    """``v * g / ||v||``, the norm over every axis but ``dim`` (all axes for dim=-1)."""
    v = ctx.tensor(0)
    g = ctx.tensor(1, v.type.dtype)
    dim = ctx.int(2) if ctx.n_inputs > 2 else 0
    axes = tuple(range(v.rank)) if dim == -1 else tuple(a for a in range(v.rank) if a != dim % v.rank)
    norm = vector_norm(ctx, v, 2.0, axes, True)
    return ctx.b.op("mul", v, ctx.b.op("div", g, norm))


@RULES.rule("aten::native_dropout")
def native_dropout(ctx: LoweringContext) -> tuple[Value, Value]:
    """Inference: the input unchanged and an all-true mask."""
    x = ctx.tensor(0)
    if ctx.n_inputs > 2 and ctx.raw(2) is True:
        raise ctx.unsupported("dropout in training mode (random)")
    mask = ctx.b.op("expand", ctx.as_value(True, DType.BOOL), ctx.b.op("shape_of", x))
    return x, mask


def _stats_unavailable(what: str) -> Poison:
    return Poison(f"the saved {what} of a normalization (a training-time output) cannot be exported")


@RULES.rule("aten::native_group_norm")
def native_group_norm(ctx: LoweringContext) -> tuple[Value, Poison, Poison]:
    x = ctx.tensor(0)
    dt = x.type.dtype
    w, bias = ctx.optional_tensor(1, dt), ctx.optional_tensor(2, dt)
    groups, eps = ctx.int(6), ctx.float(7)
    c = x.type.shape[1]
    if not isinstance(c, int) or c % groups:
        raise ctx.unsupported(f"group norm of {c} channels in {groups} groups")
    b = ctx.b
    dims = list(x.type.shape)
    grouped = b.op("reshape", x, b.ints([dims[0], groups, -1]))
    y = b.op("reshape", standardize(b, grouped, [2], eps), b.op("shape_of", x))
    out = affine(b, y, per_channel(b, w, x.rank) if w is not None else None,
                 per_channel(b, bias, x.rank) if bias is not None else None)
    return out, _stats_unavailable("mean"), _stats_unavailable("rstd")


@RULES.rule("aten::_native_batch_norm_legit", "aten::native_batch_norm")
def native_batch_norm(ctx: LoweringContext) -> tuple[Value, Poison, Poison]:
    x = ctx.tensor(0)
    dt = x.type.dtype
    w, bias = ctx.optional_tensor(1, dt), ctx.optional_tensor(2, dt)
    with_running = ctx.n_inputs == 8
    mean, var = (ctx.optional_tensor(3, dt), ctx.optional_tensor(4, dt)) if with_running else (None, None)
    training = ctx.bool(5 if with_running else 3)
    eps = ctx.float(7 if with_running else 5)
    if training or mean is None or var is None:
        out = batch_stats_norm(ctx, x, w, bias, [0, *range(2, x.rank)], eps)
    else:
        out = running_stats_norm(ctx, x, w, bias, mean, var, eps)
    return out, _stats_unavailable("mean"), _stats_unavailable("rstd")


@RULES.rule("aten::cosine_similarity")
def cosine_similarity(ctx: LoweringContext) -> Value:
    """x·y / sqrt(max(|x|²·|y|², eps²)), PyTorch's form."""
    x1, x2 = ctx.promoted(ctx.raw(0), ctx.raw(1))
    dim = ctx.int(2) if ctx.n_inputs > 2 else 1
    eps = ctx.float(3) if ctx.n_inputs > 3 else 1e-8
    b = ctx.b
    rank = max(x1.rank, x2.rank)
    axis = dim % rank
    dot = b.op("sum_reduce", b.op("mul", x1, x2), axes=(axis,), keepdims=False)
    n1 = b.op("sum_reduce", b.op("mul", x1, x1), axes=(axis - (rank - x1.rank),), keepdims=False)
    n2 = b.op("sum_reduce", b.op("mul", x2, x2), axes=(axis - (rank - x2.rank),), keepdims=False)
    denom = b.op("sqrt", b.op("max", b.op("mul", n1, n2), ctx.as_value(eps * eps, x1.type.dtype)))
    return b.op("div", dot, denom)


@RULES.rule("aten::pairwise_distance")
def pairwise_distance(ctx: LoweringContext) -> Value:
    x1, x2 = ctx.promoted(ctx.raw(0), ctx.raw(1))
    p = ctx.float(2) if ctx.n_inputs > 2 else 2.0
    eps = ctx.float(3) if ctx.n_inputs > 3 else 1e-6
    keep = ctx.bool(4) if ctx.n_inputs > 4 else False
    diff = ctx.b.op("add", ctx.b.op("sub", x1, x2), ctx.as_value(eps, x1.type.dtype))
    return vector_norm(ctx, diff, p, (diff.rank - 1,), keep)


@RULES.rule("aten::cdist", "aten::_cdist_forward")
def cdist(ctx: LoweringContext) -> Value:
    """The exact difference form ([…, P, 1, M] − […, 1, R, M], then a norm), not the
    matmul expansion PyTorch may use for large inputs: more exact, more memory."""
    x1, x2 = ctx.promoted(ctx.raw(0), ctx.raw(1))
    p = ctx.float(2) if ctx.n_inputs > 2 else 2.0
    b = ctx.b
    diff = b.op("sub", b.op("unsqueeze", x1, axes=(x1.rank - 1,)), b.op("unsqueeze", x2, axes=(x2.rank - 2,)))
    return vector_norm(ctx, diff, p, (diff.rank - 1,), False)


@RULES.rule("aten::pdist", "aten::_pdist_forward")
def pdist(ctx: LoweringContext) -> Value:
    """Distances of every pair i < j of rows, in row-major order of the pairs."""
    x = ctx.tensor(0)
    p = ctx.float(1) if ctx.n_inputs > 1 else 2.0
    n = x.type.shape[0]
    if not isinstance(n, int) or x.rank != 2:
        raise ctx.unsupported("pdist of a dynamic or non-2-D input")
    i, j = np.triu_indices(n, 1)
    b = ctx.b
    a = b.op("gather", x, b.const(i.astype(np.int64), DType.I64), axis=0)
    c = b.op("gather", x, b.const(j.astype(np.int64), DType.I64), axis=0)
    return vector_norm(ctx, b.op("sub", a, c), p, (1,), False)
