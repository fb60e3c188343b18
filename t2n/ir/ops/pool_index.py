"""Max pooling that also gives where each maximum was (``return_indices=True``).

The index is PyTorch's: the flat position of the maximum in its input plane (for 2-D
pooling ``h * W + w`` over the unpadded ``H x W`` plane of its batch item and channel),
the first maximum of its window on ties. ``max_unpool`` writes values back at those
positions (a scatter, see the ``index`` family).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from t2n.ir.attributes import INT, required
from t2n.ir.dtypes import DType
from t2n.ir.infer_utils import InferError, tensor
from t2n.ir.ops.nn import POOL_ATTRS, conv_out_dim
from t2n.ir.schema import InferContext, OpTable
from t2n.ir.types import TensorType

TABLE = OpTable("pool_index")


def _eval_max_pool_with_index(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
    """Reference evaluator (constant folding, test oracle): one window at a time."""
    x = xs[0]
    k, st, dl, pad = (a[n] for n in ("kernel", "stride", "dilation", "padding"))
    n = len(k)
    lead, plane = x.shape[:-n], x.shape[-n:]
    flat = x.reshape((-1,) + plane)
    outs = [int(conv_out_dim(plane[i], k[i], st[i], dl[i], *pad[i])) for i in range(n)]
    values = np.empty((flat.shape[0], *outs), dtype=x.dtype)
    index = np.empty((flat.shape[0], *outs), dtype=np.int64)
    for pos in itertools.product(*(range(o) for o in outs)):
        cells = [c for c in itertools.product(*(
            [p * st[i] - pad[i][0] + j * dl[i] for j in range(k[i])] for i, p in enumerate(pos)))
            if all(0 <= c[i] < plane[i] for i in range(n))]
        where = np.ravel_multi_index(tuple(np.array(cells).T), plane)
        window = flat.reshape(flat.shape[0], -1)[:, where]
        best = np.argmax(window, axis=1)
        at: tuple[Any, ...] = (slice(None), *pos)
        values[at] = window[np.arange(window.shape[0]), best]
        index[at] = where[best]
    return [values.reshape(lead + tuple(outs)), index.reshape(lead + tuple(outs))]


@TABLE.op("max_pool_with_index", evaluate=_eval_max_pool_with_index, attrs=POOL_ATTRS)
def _max_pool_with_index(ctx: InferContext) -> list[TensorType]:
    """(values, i64 indices) of a max pool over the trailing ``len(kernel)`` axes; attrs
    as ``max_pool`` (kernel, stride, dilation, padding: padded cells never win). An index
    is the flat position of the maximum in its unpadded input plane, as PyTorch's."""
    x = ctx.types[0]
    k, st, dl, pad = (ctx.attrs[n] for n in ("kernel", "stride", "dilation", "padding"))
    lead = x.rank - len(k)
    out = list(x.shape[:lead])
    for i in range(len(k)):
        out.append(conv_out_dim(x.shape[lead + i], k[i], st[i], dl[i], *pad[i]))
    return [tensor(x.dtype, out), tensor(DType.I64, out)]


def _eval_unpool_scatter(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
    base, idx, x = xs
    lead = int(a["lead"])
    out = base.copy()
    flat_idx = idx.astype(np.int64).reshape(idx.shape[:lead] + (-1,))
    np.put_along_axis(out, flat_idx, x.reshape(x.shape[:lead] + (-1,)), axis=lead)
    return [out]


@TABLE.op("unpool_scatter", evaluate=_eval_unpool_scatter, attrs={"lead": required(INT)})
def _unpool_scatter(ctx: InferContext) -> list[TensorType]:
    """``base`` (``lead`` axes, then one flat plane axis) with each value of ``x`` written
    at its plane index in ``idx``: ``x`` and ``idx`` have ``lead`` axes, then spatial
    axes that are flattened (their sizes may be different expressions of the same
    number: the values of a decoder, the indices of its encoder). Indices in range."""
    base, idx, x = ctx.types
    lead = int(ctx.attrs["lead"])
    if not idx.dtype.is_int or idx.rank != x.rank or x.rank <= lead or base.rank != lead + 1:
        raise InferError("unpool_scatter: integer indices of the values' rank, and a base of rank lead + 1")
    if x.dtype != base.dtype:
        raise InferError(f"unpool_scatter: values are {x.dtype}, the base is {base.dtype}")
    if x.shape.is_static and idx.shape.is_static and list(x.shape) != list(idx.shape):
        raise InferError(f"unpool_scatter: values {list(x.shape)} and indices {list(idx.shape)} differ")
    return [base]
