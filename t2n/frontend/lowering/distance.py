"""Distances and similarities: cosine similarity, pairwise distance, cdist and pdist,
built from p-norms of differences."""

from __future__ import annotations

import numpy as np

from t2n.frontend.context import LoweringContext
from t2n.frontend.lowering.reduce import vector_norm
from t2n.frontend.registry import RuleSet
from t2n.ir import DType, Value

RULES = RuleSet("distance")


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
