"""Top-k (and so sort): the k largest or smallest along one axis, with their indices."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from t2n.ir.attributes import BOOL, INT, required
from t2n.ir.dtypes import DType
from t2n.ir.infer_utils import InferError, tensor
from t2n.ir.schema import InferContext, OpTable
from t2n.ir.types import TensorType

TABLE = OpTable("sort")

WHOLE_AXIS = -1
"""``topk``'s ``k`` of a sort: every element of the axis."""


def _eval_topk(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
    x, axis = xs[0], int(a["axis"])
    k = x.shape[axis] if a["k"] == WHOLE_AXIS else int(a["k"])
    order = np.argsort(-x if a["largest"] else x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return [np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)]


@TABLE.op("topk", evaluate=_eval_topk, attrs={"k": required(INT), "axis": required(INT), "largest": required(BOOL)})
def _topk(ctx: InferContext) -> list[TensorType]:
    """(values, i64 indices) of the ``k`` largest (``largest``) or smallest elements along
    ``axis``, sorted; ties keep the earlier index first. ``k`` = ``WHOLE_AXIS`` sorts the whole axis,
    whatever its length (a dynamic axis stays dynamic)."""
    x = ctx.types[0]
    axis, k = int(ctx.attrs["axis"]), ctx.attrs["k"]
    if not 0 <= axis < x.rank:
        raise InferError(f"topk: axis {axis} out of range for rank {x.rank}")
    shape = list(x.shape)
    shape[axis] = x.shape[axis] if k == WHOLE_AXIS else k
    return [tensor(x.dtype, shape), tensor(DType.I64, shape)]
