"""Reductions over a set of axes, and arg-reductions over one axis."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from t2n.ir.attributes import BOOL, INTS, optional, required
from t2n.ir.dtypes import DType
from t2n.ir.infer_utils import InferError, tensor
from t2n.ir.schema import InferContext, OpSchema, OpTable
from t2n.ir.types import TensorType

TABLE = OpTable("reduce")


def reduced_shape(shape: Sequence[Any], axes: Sequence[int], keepdims: bool) -> list[Any]:
    if any(not 0 <= a < len(shape) for a in axes):
        raise InferError(f"reduce: axes {list(axes)} out of range for rank {len(shape)}")
    if keepdims:
        return [1 if i in axes else d for i, d in enumerate(shape)]
    return [d for i, d in enumerate(shape) if i not in axes]


def _reduce_infer(out_dtype: DType | None) -> Callable[[InferContext], list[TensorType]]:
    def infer(ctx: InferContext) -> list[TensorType]:
        t = ctx.types[0]
        shape = reduced_shape(t.shape, ctx.attrs["axes"], ctx.attrs.get("keepdims", False))
        return [tensor(out_dtype or t.dtype, shape)]

    return infer


def _reduce_eval(fn: Callable[..., np.ndarray]) -> Callable[[Sequence[np.ndarray], Mapping[str, Any]], list[np.ndarray]]:
    def ev(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
        out = fn(xs[0], axis=tuple(a["axes"]), keepdims=a.get("keepdims", False))
        return [np.asarray(out).astype(xs[0].dtype)]

    return ev


REDUCE_ATTRS = {"axes": required(INTS), "keepdims": optional(BOOL, False)}

REDUCTIONS: dict[str, Callable[..., np.ndarray]] = {
    "sum_reduce": np.sum, "mean_reduce": np.mean, "max_reduce": np.max, "min_reduce": np.min,
    "prod_reduce": np.prod, "any_reduce": np.any, "all_reduce": np.all,
}
"""Reductions with attrs ``axes`` (non-negative) and ``keepdims``."""

for _name, _fn in REDUCTIONS.items():
    TABLE.add(OpSchema(_name, _reduce_infer(None), _reduce_eval(_fn), attrs=REDUCE_ATTRS))


def _arg_eval(fn: Callable[..., np.ndarray]) -> Callable[[Sequence[np.ndarray], Mapping[str, Any]], list[np.ndarray]]:
    def ev(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
        (axis,) = a["axes"]
        out = fn(xs[0], axis=axis, keepdims=a.get("keepdims", False))
        return [np.asarray(out, dtype=np.int64)]

    return ev


TABLE.add(OpSchema("argmax_reduce", _reduce_infer(DType.I64), _arg_eval(np.argmax),
                   doc="Index of the first maximum along the single axis in ``axes`` (i64).", attrs=REDUCE_ATTRS))
TABLE.add(OpSchema("argmin_reduce", _reduce_infer(DType.I64), _arg_eval(np.argmin),
                   doc="Index of the first minimum along the single axis in ``axes`` (i64).", attrs=REDUCE_ATTRS))
