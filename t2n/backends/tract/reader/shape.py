"""tract's shape, indexing and data-movement operations, reductions and casts."""

from __future__ import annotations

import itertools

import numpy as np

from t2n.backends.nnef.reader.infer_shape import gather_result, reduce_infer
from t2n.backends.nnef.reader.optable import Args, ReadOpTable, TensorVal, tensor
from t2n.ir import DType, Sym
from t2n.ir.infer_utils import broadcast_shapes

TRACT = ReadOpTable("shape/tract")


@TRACT.op("tract_core_broadcast", "input, shape")
def _broadcast(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    return [tensor(x.dtype, broadcast_shapes(x.shape, a.dims("shape")))]


@TRACT.op("tract_core_dyn_slice", "input, start, end, axis, len")
def _dyn_slice(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    dims = list(x.shape)
    dims[a.integer("axis")] = a.dim("len")
    return [tensor(x.dtype, dims)]


@TRACT.op("tract_core_downsample", "input, axis, stride, modulo = 0")
def _downsample(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    axis, stride, modulo = a.integer("axis"), abs(a.integer("stride")), a.integer("modulo")
    dims = list(x.shape)
    dims[axis] = (dims[axis] - modulo + (stride - 1)) // stride
    return [tensor(x.dtype, dims)]


@TRACT.op("tract_core_gather", "input, indices, axis, datum_type = ''")
def _gather_tract(a: Args) -> list[TensorVal]:
    dtype = a.dtype("datum_type") if a.text("datum_type") else None
    return [gather_result(a.tensor("input"), a.tensor("indices"), a.integer("axis"), dtype)]


@TRACT.op("tract_core_gather_elements", "input, indices, axis")
def _gather_elements(a: Args) -> list[TensorVal]:
    return [tensor(a.tensor("input").dtype, a.tensor("indices").shape)]


@TRACT.op("tract_core_gather_nd", "input, indices, batch_dims = 0")
def _gather_nd(a: Args) -> list[TensorVal]:
    x, idx = a.tensor("input"), a.tensor("indices")
    depth = idx.shape[-1]
    if isinstance(depth, Sym):
        raise a.fail("the last axis of the indices must be static")
    b = a.integer("batch_dims")
    return [tensor(x.dtype, list(idx.shape[:-1]) + list(x.shape[b + int(depth):]))]


@TRACT.op(["tract_core_scatter_elements", "tract_core_scatter_nd"], "input, indices, updates, axis = 0, reduction = 'none'")
def _scatter(a: Args) -> list[TensorVal]:
    return [TensorVal(a.tensor("input").type)]


@TRACT.op("tract_core_one_hot", "input, axis, dim, value_off = 0.0, value_on = 1.0")
def _one_hot(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    dims = list(x.shape)
    dims.insert(a.integer("axis"), a.integer("dim"))
    on = a.raw("value_on")
    dtype = DType.F32 if isinstance(on, float) else (on.dtype if isinstance(on, TensorVal) else DType.I64)
    return [tensor(dtype, dims)]


_fresh = itertools.count()


@TRACT.op("tract_core_range", "start, end, step")
def _range(a: Args) -> list[TensorVal]:
    start, end, step = (a.tensor(n) for n in ("start", "end", "step"))
    dtype = start.dtype
    values = [np.asarray(v.known).reshape(-1).tolist()[0] for v in (start, end, step) if v.known is not None]
    if len(values) == 3 and isinstance(values[2], int) and values[2] != 0:
        b, e, s = values
        length = (e - b + (s - 1)) // s if s > 0 else (b - e + (-s - 1)) // (-s)
        known = None
        if all(isinstance(v, int) for v in values) and not dtype.is_float:
            known = np.arange(b, e, s, dtype=dtype.numpy)
        return [tensor(dtype, [length], known)]
    return [tensor(dtype, [Sym(f"range{next(_fresh)}")])]


@TRACT.op("tract_core_shape_of", "input")
def _shape_of(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    known = np.empty(x.rank, dtype=object)
    known[:] = list(x.shape)
    return [tensor(DType.I64, [x.rank], known)]


@TRACT.op("tract_core_cast", "input, to")
def _cast(a: Args) -> list[TensorVal]:
    to = a.dtype("to")
    x = a.tensor("input", None if not to.is_float else to)
    known = None
    if x.known is not None and not to.is_float:
        k = np.asarray(x.known)
        known = k if k.dtype == object else k.astype(to.numpy)
    return [tensor(to, x.shape, known)]


@TRACT.op(["tract_core_trilu"], "input, k, upper = true")
def _trilu(a: Args) -> list[TensorVal]:
    return [TensorVal(a.tensor("input").type)]


@TRACT.op("tract_core_topk", "input, k, axis, largest = true")
def _topk(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    dims = list(x.shape)
    dims[a.integer("axis")] = a.dim("k")
    return [tensor(x.dtype, dims), tensor(DType.I64, dims)]


@TRACT.op("tract_core_cumsum", "input, axis, exclusive = false, reverse = false")
def _cumsum(a: Args) -> list[TensorVal]:
    return [TensorVal(a.tensor("input").type)]


TRACT.op("tract_core_product_reduce", "input, axes")(reduce_infer(None))
TRACT.op(["tract_core_argmax_reduce_last", "tract_core_argmin_reduce_last"], "input, axes")(reduce_infer(DType.I64))
