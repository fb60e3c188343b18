"""Running sums: ``cumsum(x)`` adds ``x`` up along ``axis`` (one native op, written only
for targets that run it: tract's ``tract_core_cumsum``, linear, exact). Else as one loop: ``cumsum_scan(x, zeros)`` adds ``x`` up along ``axis``,
from ``zeros`` (``x``'s shape with that axis of length 1, built by the frontend from
``x``'s sizes so that it follows dynamic axes). Linear in the axis' length; tract runs
it as a ``tract_core_scan`` loop."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from t2n.ir.attributes import INT, required
from t2n.ir.infer_utils import InferError, tensor
from t2n.ir.schema import InferContext, OpTable
from t2n.ir.types import TensorType

TABLE = OpTable("scan")


def _eval(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
    return [np.cumsum(xs[0], axis=int(a["axis"])).astype(xs[0].dtype)]


@TABLE.op("cumsum_scan", evaluate=_eval, attrs={"axis": required(INT)})
def _cumsum_scan(ctx: InferContext) -> list[TensorType]:
    x, zeros = ctx.types[0], ctx.types[1]
    axis = int(ctx.attrs["axis"])
    if not 0 <= axis < x.rank:
        raise InferError(f"cumsum_scan: axis {axis} out of range for rank {x.rank}")
    if zeros.rank != x.rank or zeros.dtype != x.dtype or zeros.shape[axis] != 1:
        raise InferError("cumsum_scan: the initial sums have x's rank and dtype, and length 1 on the axis")
    return [tensor(x.dtype, list(x.shape))]


def _eval_cumsum(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
    return [np.cumsum(xs[0], axis=int(a["axis"]), dtype=xs[0].dtype)]


@TABLE.op("cumsum", evaluate=_eval_cumsum, attrs={"axis": required(INT)})
def _cumsum(ctx: InferContext) -> list[TensorType]:
    x = ctx.types[0]
    axis = int(ctx.attrs["axis"])
    if not 0 <= axis < x.rank:
        raise InferError(f"cumsum: axis {axis} out of range for rank {x.rank}")
    return [tensor(x.dtype, list(x.shape))]
