"""Normalization layers at inference.

Batch norm with running statistics is a per-channel affine map (its scale and shift
fold into constants, and ``FoldBatchNorm`` folds them into a preceding conv or
linear). Every normalization over statistics of the input (layer, group, instance,
batch norm without running statistics) subtracts the mean before squaring, the
stable way, and computes in f32 for f16/bf16 inputs as PyTorch's CPU kernels do.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from t2n.frontend.context import LoweringContext, Poison
from t2n.frontend.helpers import scalar, unsqueeze
from t2n.frontend.lowering.reduce import vector_norm
from t2n.frontend.lowering.shape import concat_shape, shape_part
from t2n.frontend.registry import RuleSet
from t2n.ir import Builder, DType, Value

RULES = RuleSet("norm")

_LOW_PRECISION = (DType.F16, DType.BF16)


def upcast(b: Builder, x: Value) -> Value:
    """f16/bf16 statistics are computed in f32 (PyTorch's opmath type)."""
    return b.cast(x, DType.F32) if x.type.dtype in _LOW_PRECISION else x


def moments(b: Builder, x: Value, axes: Sequence[int]) -> tuple[Value, Value]:
    """(x - mean, biased variance) over ``axes``, both keeping the reduced axes."""
    mean = b.op("mean_reduce", x, axes=tuple(axes), keepdims=True)
    centered = b.op("sub", x, mean)
    var = b.op("mean_reduce", b.op("mul", centered, centered), axes=tuple(axes), keepdims=True)
    return centered, var


def standardize(b: Builder, x: Value, axes: Sequence[int], eps: float) -> Value:
    """(x - mean) / sqrt(var + eps) over ``axes``, in x's dtype (upcast internally).

    Written as ``rms_norm(x - mean)`` (the same numbers: the variance is the mean square
    of the centred values), over one axis: trailing axes are merged by a reshape first.
    That is the form tract's ONNX loader builds for instance and group norms, and tract
    runs it as one ``tract_core_rms_norm``: the mean, square, mean, add, rsqrt and product
    over three axes of a group norm (8 x 16 x 128², 2 groups) ran 1.21x the ONNX path's
    time (artifact-speed grid, ``norm kind=group``; benchmarks/RESULTS_ARTIFACT_SPEED.md).
    Except where tract runs the reductions and products faster (:func:`_unit_before`)."""
    xs = upcast(b, x)
    axes = sorted(axes)
    if _unit_before(xs, axes):
        centered, var = moments(b, xs, axes)
        inv = b.op("rsqrt", b.op("add", var, scalar(b, eps, xs.type.dtype)))
        return b.cast(b.op("mul", centered, inv), x.type.dtype)
    if len(axes) > 1 and axes == list(range(axes[0], xs.rank)):
        flat = b.op("reshape", xs, concat_shape(b, [shape_part(b, xs, 0, axes[0]), [-1]]))
        y = b.op("reshape", _centred_rms(b, flat, [axes[0]], eps), b.op("shape_of", xs))
    else:
        y = _centred_rms(b, xs, axes, eps)
    return b.cast(y, x.type.dtype)


def _unit_before(x: Value, axes: Sequence[int]) -> bool:
    """Whether the axis before the normalized ones, or all of those, has one element:
    an instance norm of one channel, or a norm over a unit axis. There tract 0.23.9 runs
    the mean, square, mean, add, rsqrt and product faster than ``rms_norm`` of the
    centred values: 1 channel, batch 4-8, 64² to 128²: 1.21-1.42x slower as rms_norm
    (0.034 against 0.028 ms at 4 x 64²), where 2 to 64 channels ran 0.61-0.86x of the
    decomposed form (artifact-speed grid, ``norm kind=instance``)."""
    before = x.type.shape[axes[0] - 1] if axes[0] > 0 else None
    return before == 1 or all(x.type.shape[a] == 1 for a in axes)


def _centred_rms(b: Builder, x: Value, axes: Sequence[int], eps: float) -> Value:
    centered = b.op("sub", x, b.op("mean_reduce", x, axes=tuple(axes), keepdims=True))
    return b.op("rms_norm", centered, axes=tuple(axes), eps=eps)


def per_channel(b: Builder, v: Value, rank: int) -> Value:
    """A [C] vector shaped to broadcast along axis 1 of a rank-``rank`` tensor."""
    return unsqueeze(b, v, range(1, rank - 1)) if rank > 2 else v


def affine(b: Builder, y: Value, weight: Value | None, bias: Value | None) -> Value:
    """y * weight + bias, each optional; both already broadcast against y."""
    if weight is not None:
        y = b.op("mul", y, weight)
    if bias is not None:
        y = b.op("add", y, bias)
    return y


def running_stats_norm(ctx: LoweringContext, x: Value, weight: Value | None, bias: Value | None,
                       mean: Value, var: Value, eps: float) -> Value:
    """y = x * scale + shift, scale = w / sqrt(var + eps), shift = b - mean * scale.
    With constant statistics both fold into two small per-channel constants."""
    b = ctx.b
    dt = x.type.dtype
    inv = b.op("rsqrt", b.op("add", var, scalar(b, eps, dt)))
    scale = b.op("mul", inv, weight) if weight is not None else inv
    shift = b.op("neg", b.op("mul", mean, scale))
    if bias is not None:
        shift = b.op("add", shift, bias)
    return b.op("add", b.op("mul", x, per_channel(b, scale, x.rank)), per_channel(b, shift, x.rank))


def batch_stats_norm(ctx: LoweringContext, x: Value, weight: Value | None, bias: Value | None,
                     axes: Sequence[int], eps: float) -> Value:
    b = ctx.b
    y = standardize(b, x, axes, eps)
    w = per_channel(b, weight, x.rank) if weight is not None else None
    bb = per_channel(b, bias, x.rank) if bias is not None else None
    return affine(b, y, w, bb)


@RULES.rule("aten::batch_norm", "aten::_native_batch_norm_legit_no_training")
def batch_norm(ctx: LoweringContext) -> Value | tuple[Value, Value, Value]:
    """Running statistics in eval mode; the batch's own statistics when there are none
    (``track_running_stats=False``) or ``training=True`` is asked for explicitly, as
    PyTorch does in those cases."""
    x = ctx.tensor(0)
    if x.rank < 2:
        raise ctx.unsupported(f"batch norm of a rank-{x.rank} tensor")
    dt = x.type.dtype
    w, bias, mean, var = (ctx.optional_tensor(i, dt) for i in range(1, 5))
    if ctx.kind == "aten::batch_norm":
        training, eps = ctx.bool(5), ctx.float(7)
    else:
        training, eps = False, ctx.float(6)
    if training or mean is None or var is None:
        axes = [0, *range(2, x.rank)]
        return batch_stats_norm(ctx, x, w, bias, axes, eps)
    out = running_stats_norm(ctx, x, w, bias, mean, var, eps)
    if ctx.n_outputs == 3:
        return out, mean, ctx.b.op("rsqrt", ctx.b.op("add", var, scalar(ctx.b, eps, dt)))
    return out


@RULES.rule("aten::instance_norm")
def instance_norm(ctx: LoweringContext) -> Value:
    """Per-sample, per-channel statistics over the spatial axes; running statistics
    instead when the layer tracks them and is in eval mode (``use_input_stats=False``)."""
    x = ctx.tensor(0)
    if x.rank < 3:
        raise ctx.unsupported(f"instance norm of a rank-{x.rank} tensor (needs N, C and spatial axes)")
    dt = x.type.dtype
    w, bias, mean, var = (ctx.optional_tensor(i, dt) for i in range(1, 5))
    use_input_stats, eps = ctx.bool(5), ctx.float(7)
    if not use_input_stats:
        if mean is None or var is None:
            raise ctx.unsupported("instance norm without input statistics or running statistics")
        return running_stats_norm(ctx, x, w, bias, mean, var, eps)
    return batch_stats_norm(ctx, x, w, bias, range(2, x.rank), eps)


def _trailing_axes(ctx: LoweringContext, x: Value, key: int | str) -> list[int]:
    n = len(ctx.ints(key))
    if not 0 < n <= x.rank:
        raise ctx.unsupported(f"normalized_shape of {n} axes for a rank-{x.rank} tensor")
    return list(range(x.rank - n, x.rank))


@RULES.rule("aten::layer_norm", "aten::native_layer_norm")
def layer_norm(ctx: LoweringContext) -> Value | tuple[Value, Value, Value]:
    """Normalizes over the trailing ``normalized_shape`` axes; weight and bias have that
    shape and broadcast from the right."""
    x = ctx.tensor(0)
    dt = x.type.dtype
    axes = _trailing_axes(ctx, x, 1)
    w, bias = ctx.optional_tensor(2, dt), ctx.optional_tensor(3, dt)
    eps = ctx.float(4)
    if ctx.n_outputs == 3:
        b = ctx.b
        xs = upcast(b, x)
        centered, var = moments(b, xs, axes)
        rstd = b.op("rsqrt", b.op("add", var, scalar(b, eps, xs.type.dtype)))
        y = b.cast(b.op("mul", centered, rstd), dt)
        mean = b.op("mean_reduce", xs, axes=tuple(axes), keepdims=True)
        return affine(b, y, w, bias), mean, rstd
    return affine(ctx.b, standardize(ctx.b, x, axes, eps), w, bias)


@RULES.rule("aten::group_norm")
def group_norm(ctx: LoweringContext) -> Value:
    """Channels split into ``num_groups`` groups, each normalized over its channels and
    the spatial axes: x is viewed as (N, G, C/G, *spatial), sizes taken from the graph."""
    x = ctx.tensor(0)
    if x.rank < 2:
        raise ctx.unsupported(f"group norm of a rank-{x.rank} tensor")
    dt = x.type.dtype
    groups = ctx.int(1)
    c = x.type.shape[1]
    if not isinstance(c, int):
        raise ctx.unsupported("group norm over a dynamic channel axis")
    if groups <= 0 or c % groups:
        raise ctx.unsupported(f"{c} channels in {groups} groups")
    w, bias = ctx.optional_tensor(2, dt), ctx.optional_tensor(3, dt)
    eps = ctx.float(4)
    return grouped_norm(ctx.b, x, groups, eps, w, bias)


def grouped_norm(b: Builder, x: Value, groups: int, eps: float, weight: Value | None,
                 bias: Value | None) -> Value:
    """Group norm of ``x`` (N, C, *spatial): standardized as (N, G, rest), the affine
    applied on (N, C, rest), then the input's shape.

    The affine on (N, C, rest) rather than on (N, C, *spatial): tract 0.23.9 runs a
    product by a per-channel constant faster when it broadcasts along one long contiguous
    axis. A group norm of 64 channels in 8 groups after a convolution, 8 x 64 x 8²:
    1.14-1.24x the best peer's time with the affine on the 4-D tensor (its product and sum
    took 0.32 of 1.44 ms in tract's profile), 1.00-1.03x on (N, C, rest) (0.09 ms)
    (artifact-speed grid, ``norm kind=group``; benchmarks/RESULTS_ARTIFACT_SPEED.md)."""
    c = x.type.shape[1]
    assert isinstance(c, int)
    batch = shape_part(b, x, 0, 1)
    grouped = b.op("reshape", x, concat_shape(b, [batch, [groups, -1]]))
    y = standardize(b, grouped, [2], eps)
    if weight is None and bias is None:
        return b.op("reshape", y, b.op("shape_of", x))
    y = b.op("reshape", y, concat_shape(b, [batch, [c, -1]]))
    y = affine(b, y, unsqueeze(b, weight, [1]) if weight is not None else None,
               unsqueeze(b, bias, [1]) if bias is not None else None)
    return b.op("reshape", y, b.op("shape_of", x))


def default_rms_eps(dtype: DType) -> float:
    """PyTorch's eps=None: the machine epsilon of the type it computes in (f32 for f16
    and bf16 inputs, which it upcasts)."""
    return float(np.finfo(np.float64 if dtype is DType.F64 else np.float32).eps)


@RULES.rule("aten::rms_norm")
def rms_norm(ctx: LoweringContext) -> Value:
    """x / sqrt(mean(x²) + eps) over the trailing ``normalized_shape`` axes, times weight;
    one ``rms_norm`` IR op, which tract runs as ``tract_core_rms_norm``."""
    x = ctx.tensor(0)
    dt = x.type.dtype
    axes = _trailing_axes(ctx, x, 1)
    w = ctx.optional_tensor(2, dt)
    eps = default_rms_eps(dt) if ctx.is_none(3) else ctx.float(3)
    b = ctx.b
    y = b.cast(b.op("rms_norm", upcast(b, x), axes=tuple(axes), eps=eps), dt)
    return affine(b, y, w, None)


# -- weight normalization and the native_* forms -----------------------------------

@RULES.rule("aten::_weight_norm")
def weight_norm(ctx: LoweringContext) -> Value:
    """``v * g / ||v||``, the norm over every axis but ``dim`` (all axes for dim=-1)."""
    v = ctx.tensor(0)
    g = ctx.tensor(1, v.type.dtype)
    dim = ctx.int(2) if ctx.n_inputs > 2 else 0
    axes = tuple(range(v.rank)) if dim == -1 else tuple(a for a in range(v.rank) if a != dim % v.rank)
    norm = vector_norm(ctx, v, 2.0, axes, True)
    return ctx.b.op("mul", v, ctx.b.op("div", g, norm))


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
    out = grouped_norm(ctx.b, x, groups, eps, w, bias)
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
