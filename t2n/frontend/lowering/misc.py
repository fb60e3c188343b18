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


GRID_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
GRID_PADDING = {0: "zeros", 1: "border", 2: "reflection"}


@RULES.rule("aten::grid_sampler", "aten::grid_sampler_2d")
def grid_sampler(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    grid = ctx.tensor(1, x.type.dtype)
    if x.rank != 4:
        raise ctx.unsupported("grid sampling of a 5-D (volumetric) input")
    mode, padding = GRID_MODES[ctx.int(2)], GRID_PADDING[ctx.int(3)]
    if mode == "bicubic" and padding == "border":
        # tract 0.23.9 clamps bicubic taps differently from PyTorch there (tested)
        raise ctx.unsupported("bicubic grid sampling with padding_mode='border'")
    return ctx.b.op("grid_sample", x, grid, mode=mode, padding_mode=padding, align_corners=ctx.bool(4))


def _pairs(ctx: LoweringContext, key: int) -> list[int]:
    v = ctx.ints(key)
    return v * 2 if len(v) == 1 else v


def _identity_kernel(channels: int, kh: int, kw: int, dtype: DType) -> np.ndarray:
    """[C*kh*kw, 1, kh, kw]: output channel c*K + k copies kernel offset k of channel c."""
    k = kh * kw
    w = np.zeros((channels * k, 1, kh, kw), dtype=dtype.numpy)
    for c in range(channels):
        for i in range(k):
            w[c * k + i, 0, i // kw, i % kw] = 1
    return w


@RULES.rule("aten::im2col")
def im2col(ctx: LoweringContext) -> Value:
    """``nn.Unfold``: a grouped convolution by a one-hot kernel puts each window offset
    of each channel in its own output channel (exact: one product by 1 per output)."""
    x = ctx.tensor(0)
    (kh, kw), dil, pad, stride = _pairs(ctx, 1), _pairs(ctx, 2), _pairs(ctx, 3), _pairs(ctx, 4)
    unbatched = x.rank == 3
    b = ctx.b
    if unbatched:
        x = b.op("unsqueeze", x, axes=(0,))
    c = x.type.shape[1]
    if not isinstance(c, int):
        raise ctx.unsupported("unfold over a dynamic channel axis")
    w = b.const(_identity_kernel(c, kh, kw, x.type.dtype), x.type.dtype)
    y = b.op("conv", x, w, stride=tuple(stride), dilation=tuple(dil),
             padding=((pad[0], pad[0]), (pad[1], pad[1])), groups=c)
    dims = list(y.type.shape)
    out = b.op("reshape", y, b.ints([dims[0], dims[1], dims[2] * dims[3]]))
    return b.op("squeeze", out, axes=(0,)) if unbatched else out


@RULES.rule("aten::col2im")
def col2im(ctx: LoweringContext) -> Value:
    """``nn.Fold``, the adjoint of unfold: the same one-hot kernel in a grouped transposed
    convolution sums every window's values back into place."""
    cols = ctx.tensor(0)
    (h, w_), (kh, kw) = _pairs(ctx, 1), _pairs(ctx, 2)
    dil, pad, stride = _pairs(ctx, 3), _pairs(ctx, 4), _pairs(ctx, 5)
    b = ctx.b
    unbatched = cols.rank == 2
    if unbatched:
        cols = b.op("unsqueeze", cols, axes=(0,))
    ck = cols.type.shape[1]
    if not isinstance(ck, int) or ck % (kh * kw):
        raise ctx.unsupported("fold with a dynamic or non-divisible channel axis")
    c = ck // (kh * kw)
    oh = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w_ + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    grid = b.op("reshape", cols, b.ints([cols.type.shape[0], ck, oh, ow]))
    weight = b.const(_identity_kernel(c, kh, kw, cols.type.dtype), cols.type.dtype)
    full_h = (oh - 1) * stride[0] + dil[0] * (kh - 1) + 1
    full_w = (ow - 1) * stride[1] + dil[1] * (kw - 1) + 1
    after = (full_h - pad[0] - h, full_w - pad[1] - w_)
    crop = ((pad[0], max(after[0], 0)), (pad[1], max(after[1], 0)))
    y = b.op("deconv", grid, weight, stride=tuple(stride), dilation=tuple(dil), padding=crop,
             output_padding=(0, 0), groups=c)
    if min(after) < 0:  # positions no window reaches stay zero
        y = b.op("pad", y, pads=((0, 0), (0, 0), (0, max(-after[0], 0)), (0, max(-after[1], 0))),
                 mode="constant", value=0.0)
    return b.op("squeeze", y, axes=(0,)) if unbatched else y
