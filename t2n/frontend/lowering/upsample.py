"""Interpolation (``F.interpolate``, ``nn.Upsample``): one axis at a time; and grid sampling.

Nearest modes gather with constant indices; linear and cubic modes multiply by a
constant interpolation matrix computed here from PyTorch's coordinate formulas
(``align_corners``, scale factor or size, cubic A = -0.75 with clamped borders). Both
forms run in tract and the Khronos interpreter. Nearest upsampling by an integer
factor is a tile and reshape, which keeps a dynamic axis dynamic.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from t2n.frontend.context import LoweringContext
from t2n.frontend.helpers import dim_value
from t2n.frontend.registry import RuleSet
from t2n.ir import DType, Value
from t2n.ir.schema import Trait

RULES = RuleSet("upsample")

CUBIC_A = -0.75


def _source_scale(in_size: int, out_size: int, align_corners: bool, scale: float | None) -> float:
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    if scale is not None and scale > 0:
        return 1.0 / scale
    return in_size / out_size


def nearest_indices(in_size: int, out_size: int, scale: float | None, exact: bool) -> np.ndarray:
    s = np.float32(_source_scale(in_size, out_size, False, scale))  # PyTorch computes in f32
    dst = np.arange(out_size, dtype=np.float32)
    src = np.floor((dst + np.float32(0.5)) * s) if exact else np.floor(dst * s)
    return np.minimum(src.astype(np.int64), in_size - 1)


def linear_matrix(in_size: int, out_size: int, align_corners: bool, scale: float | None) -> np.ndarray:
    s = _source_scale(in_size, out_size, align_corners, scale)
    dst = np.arange(out_size, dtype=np.float64)
    src = dst * s if align_corners else np.maximum((dst + 0.5) * s - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    i1 = np.minimum(i0 + 1, in_size - 1)
    w1 = src - i0
    m = np.zeros((out_size, in_size))
    np.add.at(m, (np.arange(out_size), i0), 1.0 - w1)
    np.add.at(m, (np.arange(out_size), i1), w1)
    return m


def _cubic(t: np.ndarray) -> list[np.ndarray]:
    """Weights of the four taps at offsets -1, 0, 1, 2 for fractional positions ``t``."""
    a = CUBIC_A

    def near(x: np.ndarray) -> np.ndarray:
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: np.ndarray) -> np.ndarray:
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def cubic_matrix(in_size: int, out_size: int, align_corners: bool, scale: float | None) -> np.ndarray:
    s = _source_scale(in_size, out_size, align_corners, scale)
    dst = np.arange(out_size, dtype=np.float64)
    src = dst * s if align_corners else (dst + 0.5) * s - 0.5
    i = np.floor(src).astype(np.int64)
    t = src - i
    m = np.zeros((out_size, in_size))
    for k, w in zip(range(-1, 3), _cubic(t)):
        np.add.at(m, (np.arange(out_size), np.clip(i + k, 0, in_size - 1)), w)
    return m


GATHER_ABOVE = {"linear": 64, "cubic": 256}
"""Interpolation along an axis longer than this gathers its taps (:func:`_apply_taps`);
along a shorter one it multiplies by the matrix (:func:`_apply_matrix`).

The rule, measured in tract 0.23.9 (CPU time, the forms' runs alternating; x2, 1 to 64
channels): the matrix product costs about ``2 x length`` multiply-adds per output, the
taps a fixed 5 (linear: 2 gathers, 2 products, 1 sum) or 11 (cubic) passes over it. At
an axis of 64 the two are even for linear (gathers / matrix 0.93-1.05 in 2-D), at 128
the gathers win (0.57-0.81), at 256 by 2.5x; at 48 the matrix wins (1.15-1.42). Cubic
evens out at 256 (1.02-1.36) and the gathers win at 384 (0.48-0.50); at 128 the matrix
is 1.2-2.5x faster. tract's own resize (``tract_core_resize``, what the ONNX path and
torch_to_nnef write) was slower than the better of the two in every shape tried
(1.1-2.6x), hence neither writes it. Grid: ``python -m benchmarks.artifact_speed --grid
--cases linear bicubic`` (benchmarks/RESULTS_ARTIFACT_SPEED.md)."""


def taps(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An interpolation matrix's rows as (indices [out, k], weights [out, k]): each output's
    nonzero entries, rows with fewer than k padded with weight 0 on their first index."""
    k = max(1, int(np.max(np.count_nonzero(m, axis=1))))
    idx = np.zeros((m.shape[0], k), dtype=np.int64)
    w = np.zeros((m.shape[0], k))
    for o, row in enumerate(m):
        nz = np.flatnonzero(row)
        idx[o, :len(nz)], w[o, :len(nz)] = nz, row[nz]
        idx[o, len(nz):] = nz[0] if len(nz) else 0
    return idx, w


def _apply_taps(ctx: LoweringContext, x: Value, axis: int, m: np.ndarray) -> Value:
    """``sum_t gather(x, idx[:, t], axis) * w[:, t]``: two (linear) or four (cubic) gathers
    along ``axis`` and their weighted sum, work in proportion to the output."""
    b = ctx.b
    idx, w = taps(m)
    shape = [m.shape[0]] + [1] * (x.rank - 1 - axis)
    y: Value | None = None
    for t in range(idx.shape[1]):
        g = b.op("gather", x, b.const(np.ascontiguousarray(idx[:, t]), DType.I64), axis=axis)
        weight = b.const(w[:, t].reshape(shape).astype(x.type.dtype.numpy), x.type.dtype)
        term = b.op("mul", g, weight)
        y = term if y is None else b.op("add", y, term)
    assert y is not None
    return y


def _apply_matrix(ctx: LoweringContext, x: Value, axis: int, m: np.ndarray) -> Value:
    """``x @ mᵀ`` along the last axis; ``m @ x`` along another, the axes after it merged
    (a reshape, no transpose): one matrix product with no copy of ``x``."""
    b = ctx.b
    mt = m if axis != x.rank - 1 else np.ascontiguousarray(m.T)
    mc = b.const(mt.astype(x.type.dtype.numpy), x.type.dtype)
    if axis == x.rank - 1:
        return b.op("matmul", x, mc, transpose_a=False, transpose_b=False)
    if axis == x.rank - 2:
        return b.op("matmul", mc, x, transpose_a=False, transpose_b=False)
    dims = [dim_value(b, x, a) for a in range(axis + 1)]
    rest = dim_value(b, x, axis + 1)
    for a in range(axis + 2, x.rank):
        rest = b.op("mul", rest, dim_value(b, x, a))
    flat = b.op("reshape", x, ctx.shape_tensor([*dims, rest]))
    y = b.op("matmul", mc, flat, transpose_a=False, transpose_b=False)
    out = [dim_value(b, x, a) for a in range(x.rank)]
    out[axis] = m.shape[0]
    return b.op("reshape", y, ctx.shape_tensor(out))


def _tile_nearest(ctx: LoweringContext, x: Value, axis: int, factor: int) -> Value:
    """Each element repeated ``factor`` times along ``axis``; sizes read at run time."""
    b = ctx.b
    y = b.op("unsqueeze", x, axes=(axis + 1,))
    reps = [1] * y.rank
    reps[axis + 1] = factor
    y = b.op("tile", y, b.ints(reps))
    dims = [dim_value(b, x, a) for a in range(x.rank)]
    dims[axis] = b.op("mul", dims[axis], b.const(np.asarray(factor, dtype=np.int64), DType.I64))
    return b.op("reshape", y, ctx.shape_tensor(dims))


def _args(ctx: LoweringContext, n: int, has_align: bool) -> tuple[list[Any] | None, bool, list[float | None]]:
    """(output sizes or None, align_corners, scale factors) from both overloads."""
    out = ctx.raw(1)
    align = ctx.bool(2) if has_align else False
    rest = [ctx.raw(i) for i in range((3 if has_align else 2), ctx.n_inputs)]
    scales: list[float | None] = [None] * n
    if len(rest) == 1 and (rest[0] is None or isinstance(rest[0], (list, tuple))):
        if rest[0] is not None:
            scales = [float(v) for v in rest[0]]
    else:
        scales = [None if v is None else float(v) for v in rest[:n]] + [None] * (n - len(rest[:n]))
    sizes = None if out is None else (list(out) if isinstance(out, (list, tuple)) else [out] * n)
    return sizes, align, scales


def _static(v: Any) -> int | None:
    if isinstance(v, int):
        return v
    if isinstance(v, Value) and v.known is not None and v.known.dtype != object:
        return int(np.asarray(v.known).item())
    return None


def _computed(v: Any) -> bool:
    """A size computed in the model from shapes (it follows dynamic axes)."""
    return isinstance(v, Value) and (v.producer is None or not v.producer.has(Trait.CONSTANT_LIKE))


def _dynamic_nearest(ctx: LoweringContext, x: Value, axis: int, given: Any,
                     scale: float | None) -> Value | None:
    """Nearest by an integer factor, known without reading sizes (so it follows dynamic
    axes): from an integer scale factor, or an output size computed from shapes that is
    a multiple of the input's. None when the factor needs the sizes."""
    if given is None and scale is not None and float(scale).is_integer():
        return x if int(scale) == 1 else _tile_nearest(ctx, x, axis, int(scale))
    traced = x.type.shape[axis]
    out = _static(given)
    if _computed(given) and isinstance(traced, int) and out and out % traced == 0:
        return x if out == traced else _tile_nearest(ctx, x, axis, out // traced)
    return None


def _sizes(ctx: LoweringContext, x: Value, axis: int, given: Any, sized: bool,
           scale: float | None) -> tuple[int, int]:
    """(input size, output size) of one axis. The interpolation indices or matrix need
    them: they are read through the graph, so that DynamicAxes reports them if the axis
    is made dynamic."""
    out = _static(given)
    size = int(ctx.to_const(dim_value(ctx.b, x, axis), f"size of axis {axis} (interpolation)"))
    if given is not None and out is not None and _computed(given):
        out = int(ctx.to_const(given, "output size"))
    if out is None and sized:
        # a size computed from shapes in forward: the traced size (a dynamic axis
        # here is reported by the dynamic-axes check)
        traced_out = ctx.traced_shape(0)
        out = traced_out[axis] if traced_out is not None else None
    if out is None:
        if scale is None:
            raise ctx.unsupported("interpolation to a size computed at run time")
        out = int(math.floor(size * scale))
    return size, out


def _resample(ctx: LoweringContext, x: Value, axis: int, mode: str, size: int, out: int,
              align: bool, scale: float | None, exact_multiple: bool) -> Value:
    """One axis from ``size`` to ``out`` (``scale`` is None when sizes were given)."""
    if mode == "nearest" and out % size == 0 and exact_multiple:
        return _tile_nearest(ctx, x, axis, out // size)
    if mode in ("nearest", "nearest-exact"):
        idx = nearest_indices(size, out, scale, mode == "nearest-exact")
        return ctx.b.op("gather", x, ctx.b.const(idx, DType.I64), axis=axis)
    matrix = linear_matrix if mode == "linear" else cubic_matrix
    apply = _apply_taps if size > GATHER_ABOVE[mode] else _apply_matrix
    return apply(ctx, x, axis, matrix(size, out, align, scale))


def interpolate(ctx: LoweringContext, mode: str, n: int, has_align: bool) -> Value:
    x = ctx.tensor(0)
    if not x.type.dtype.is_float:
        raise ctx.unsupported("interpolation of a non-float tensor")
    sizes, align, scales = _args(ctx, n, has_align)
    for i in range(n):
        axis = x.rank - n + i
        scale = scales[i]
        given = sizes[i] if sizes is not None else None
        if mode == "nearest":
            tiled = _dynamic_nearest(ctx, x, axis, given, scale)
            if tiled is not None:
                x = tiled
                continue
        size, out = _sizes(ctx, x, axis, given, sizes is not None, scale)
        if out == size and scale in (None, 1.0):
            continue
        exact_multiple = given is not None or scale == out // size
        x = _resample(ctx, x, axis, mode, size, out, align, scale if sizes is None else None, exact_multiple)
    return x


@RULES.rule("aten::upsample_nearest1d", "aten::upsample_nearest2d", "aten::upsample_nearest3d")
def upsample_nearest(ctx: LoweringContext) -> Value:
    return interpolate(ctx, "nearest", int(ctx.kind[-2]), False)


@RULES.rule("aten::_upsample_nearest_exact1d", "aten::_upsample_nearest_exact2d",
            "aten::_upsample_nearest_exact3d")
def upsample_nearest_exact(ctx: LoweringContext) -> Value:
    return interpolate(ctx, "nearest-exact", int(ctx.kind[-2]), False)


@RULES.rule("aten::upsample_linear1d", "aten::upsample_bilinear2d", "aten::upsample_trilinear3d")
def upsample_linear(ctx: LoweringContext) -> Value:
    return interpolate(ctx, "linear", int(ctx.kind[-2]), True)


@RULES.rule("aten::upsample_bicubic2d")
def upsample_bicubic(ctx: LoweringContext) -> Value:
    return interpolate(ctx, "cubic", 2, True)


def antialias_matrix(kind: str, size: int, out: int, align: bool, scale: float | None) -> np.ndarray:
    """The [out, size] matrix of one axis of PyTorch's antialiased resize, read from
    PyTorch's own kernel applied to the basis vectors: the resize is linear and its CPU
    kernel separable (one pass per axis), so each column is the image of a one-hot input
    (the other axis kept at its size, which leaves it unchanged; at size 1 PyTorch's
    kernel mixes the basis images, so it is 3)."""
    import torch

    op = getattr(torch.ops.aten, kind.split("::")[1])
    basis = torch.eye(size, dtype=torch.float64).reshape(size, 1, size, 1).expand(size, 1, size, 3).contiguous()
    with torch.no_grad():
        columns = op(basis, [out, 3], align, scale, None)
    return columns[:, 0, :, 0].T.numpy()


@RULES.rule("aten::_upsample_bilinear2d_aa", "aten::_upsample_bicubic2d_aa")
def upsample_antialias(ctx: LoweringContext) -> Value:
    """``F.interpolate(..., antialias=True)`` (bilinear, bicubic): a constant matrix per
    axis (:func:`antialias_matrix`), on static sizes."""
    x = ctx.tensor(0)
    if not x.type.dtype.is_float:
        raise ctx.unsupported("interpolation of a non-float tensor")
    sizes, align, scales = _args(ctx, 2, True)
    for i in range(2):
        axis = x.rank - 2 + i
        given = sizes[i] if sizes is not None else None
        size, out = _sizes(ctx, x, axis, given, sizes is not None, scales[i])
        if out == size and scales[i] in (None, 1.0):
            continue
        x = _apply_matrix(ctx, x, axis, antialias_matrix(ctx.kind, size, out, align,
                                                         scales[i] if sizes is None else None))
    return x


# -- grid sampling -----------------------------------------------------------------

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
