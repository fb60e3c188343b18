"""Sampling an image at given coordinates (``F.grid_sample``)."""

from __future__ import annotations

from t2n.ir.attributes import BOOL, STR, required
from t2n.ir.infer_utils import InferError, tensor
from t2n.ir.schema import InferContext, OpTable
from t2n.ir.types import TensorType

TABLE = OpTable("sample")


@TABLE.op("grid_sample", attrs={"mode": required(STR), "padding_mode": required(STR),
                               "align_corners": required(BOOL)})
def _grid_sample(ctx: InferContext) -> list[TensorType]:
    """x [N, C, H, W] sampled at grid [N, Ho, Wo, 2] (x, y in [-1, 1]) → [N, C, Ho, Wo];
    attrs mode (bilinear, nearest, bicubic), padding_mode (zeros, border, reflection),
    align_corners."""
    x, grid = ctx.types
    if x.rank != 4 or grid.rank != 4 or grid.shape[3] != 2:
        raise InferError("grid_sample: x is [N, C, H, W] and grid is [N, Ho, Wo, 2]")
    return [tensor(x.dtype, [x.shape[0], x.shape[1], grid.shape[1], grid.shape[2]])]
