"""Element-wise gathers and scatters (``torch.gather``, ``scatter``, ``index_put``).

Indices are always in range and non-negative here: the frontend normalizes negative
indices first, because an out-of-range scatter index aborts tract.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from t2n.ir.attributes import INT, STR, optional, required
from t2n.ir.infer_utils import InferError, tensor
from t2n.ir.schema import InferContext, OpTable
from t2n.ir.types import TensorType

TABLE = OpTable("index")

REDUCTIONS = ("none", "add", "mul", "max", "min")


def _eval_gather_elements(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
    return [np.take_along_axis(xs[0], xs[1].astype(np.int64), axis=a["axis"])]


@TABLE.op("gather_elements", evaluate=_eval_gather_elements, attrs={"axis": required(INT)})
def _gather_elements(ctx: InferContext) -> list[TensorType]:
    """``out[i][j][k] = x[i][idx[i][j][k]][k]`` along ``axis`` (torch.gather); the output
    has the indices' shape."""
    x, idx = ctx.types
    if not idx.dtype.is_int or idx.rank != x.rank:
        raise InferError("gather_elements: integer indices of the input's rank")
    return [tensor(x.dtype, list(idx.shape))]


def _scatter_apply(out: np.ndarray, where: tuple[np.ndarray, ...], upd: np.ndarray, red: str) -> None:
    if red == "none":
        out[where] = upd
    elif red == "add":
        np.add.at(out, where, upd)
    elif red == "mul":
        np.multiply.at(out, where, upd)
    elif red == "max":
        np.maximum.at(out, where, upd)
    else:
        np.minimum.at(out, where, upd)


def _eval_scatter_elements(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
    x, idx, upd = xs[0], xs[1].astype(np.int64), xs[2]
    out = x.copy()
    axis = a["axis"]
    grids: list[np.ndarray] = list(np.indices(idx.shape, sparse=False))
    grids[axis] = idx
    _scatter_apply(out, tuple(grids), upd, a.get("reduction", "none"))
    return [out]


@TABLE.op("scatter_elements", evaluate=_eval_scatter_elements,
          attrs={"axis": required(INT), "reduction": optional(STR, "none")})
def _scatter_elements(ctx: InferContext) -> list[TensorType]:
    """``x`` with ``x[i][idx[i][j]][j] (reduction)= upd[i][j]`` along ``axis``; ``upd`` has
    the indices' shape; reduction none/add/mul/max/min."""
    x, idx, upd = ctx.types
    if not idx.dtype.is_int or idx.rank != x.rank or upd.shape != idx.shape or upd.dtype != x.dtype:
        raise InferError("scatter_elements: indices and updates of one shape, the input's rank")
    if ctx.attrs.get("reduction", "none") not in REDUCTIONS:
        raise InferError(f"scatter_elements: reduction must be one of {REDUCTIONS}")
    return [x]


def _eval_scatter_nd(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
    x, idx, upd = xs[0], xs[1].astype(np.int64), xs[2]
    out = x.copy()
    k = idx.shape[-1]
    flat = idx.reshape(-1, k)
    where = tuple(flat[:, i] for i in range(k))
    _scatter_apply(out, where, upd.reshape((-1,) + x.shape[k:]), a.get("reduction", "none"))
    return [out]


@TABLE.op("scatter_nd", evaluate=_eval_scatter_nd, attrs={"reduction": optional(STR, "none")})
def _scatter_nd(ctx: InferContext) -> list[TensorType]:
    """ONNX ScatterND: ``idx[..., :k]`` address slices ``x[i0, …, ik-1]`` that take the
    matching ``upd`` slice; with ``reduction='add'`` repeated addresses accumulate."""
    x, idx, upd = ctx.types
    if not idx.dtype.is_int or idx.rank < 1:
        raise InferError("scatter_nd: integer indices of rank >= 1")
    k = idx.shape[-1]
    if not isinstance(k, int) or k > x.rank:
        raise InferError("scatter_nd: the last index axis must be static and at most the input's rank")
    if list(upd.shape) != list(idx.shape[:-1]) + list(x.shape[k:]) or upd.dtype != x.dtype:
        raise InferError(f"scatter_nd: updates must be {list(idx.shape[:-1]) + list(x.shape[k:])}")
    return [x]
