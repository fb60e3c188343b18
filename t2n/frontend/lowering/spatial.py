"""Spatial-transformer and sequence-first layers built from other rules: the sampling
grid of ``affine_grid`` and the time-batch-channel convolution ``conv_tbc``."""

from __future__ import annotations

import numpy as np

from t2n.frontend.context import LoweringContext
from t2n.frontend.lowering.conv import convolution
from t2n.frontend.registry import RuleSet
from t2n.ir import Value

RULES = RuleSet("spatial")


def _coordinates(n: int, align_corners: bool) -> np.ndarray:
    """Normalised pixel centres along one axis, PyTorch's convention: the corners' centres
    at ±1 with ``align_corners``, else the corners' outer edges at ±1."""
    if n <= 1:
        return np.zeros(max(n, 0))
    steps = np.linspace(-1.0, 1.0, n)
    return steps if align_corners else steps * (n - 1) / n


def base_grid(spatial: list[int], align_corners: bool) -> np.ndarray:
    """``[prod(spatial), len(spatial) + 1]``: each output point's (x, y[, z], 1), x
    running along the last axis."""
    axes = [_coordinates(n, align_corners) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")
    columns = [m.reshape(-1) for m in reversed(mesh)]
    columns.append(np.ones(int(np.prod(spatial))))
    return np.stack(columns, axis=1)


@RULES.rule("aten::affine_grid_generator")
def affine_grid_generator(ctx: LoweringContext) -> Value:
    """The grid for ``grid_sample``: a constant base grid (the output size is fixed at
    export time) times each batch's affine matrix: ``[N, *spatial, d]``."""
    theta = ctx.tensor(0)
    size = ctx.ints(1)
    align_corners = ctx.bool(2)
    if len(size) not in (4, 5) or theta.rank != 3:
        raise ctx.unsupported(f"affine_grid of size {size}: only 2-D (N, C, H, W) and 3-D "
                              "(N, C, D, H, W) grids exist")
    spatial = [int(s) for s in size[2:]]
    b = ctx.b
    grid = b.const(base_grid(spatial, align_corners).astype(theta.type.dtype.numpy), theta.type.dtype)
    points = b.op("matmul", b.op("unsqueeze", grid, axes=(0,)), theta,
                  transpose_a=False, transpose_b=True)
    return b.op("reshape", points, b.ints([int(size[0]), *spatial, len(spatial)]))


@RULES.rule("aten::conv_tbc")
def conv_tbc(ctx: LoweringContext) -> Value:
    """``[T, B, C_in]`` with weight ``[K, C_in, C_out]``: a 1-D convolution over time."""
    x = ctx.tensor(0)
    w = ctx.tensor(1, x.type.dtype)
    bias = ctx.tensor(2, x.type.dtype)
    pad = ctx.int(3) if ctx.n_inputs > 3 else 0
    b = ctx.b
    y = convolution(ctx, b.op("transpose", x, perm=(1, 2, 0)), b.op("transpose", w, perm=(2, 1, 0)),
                    bias, [1], [pad], [1], False, [0], 1)
    return b.op("transpose", y, perm=(2, 0, 1))
