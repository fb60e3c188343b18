"""Shape and data-movement NNEF operations, reductions, casts and tract's indexing ops,
with NNEF's conventions (reductions keep their axes, ``reshape``'s 0 and -1, ``slice``
bounds counted from the end when negative)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from t2n.backends.nnef.reader.infer_elementwise import via_ir
from t2n.backends.nnef.reader.optable import Args, OpTable, TensorVal, tensor
from t2n.ir import DType, Sym
from t2n.ir.dims import Dim
from t2n.ir.infer_utils import broadcast_shapes

OPS = OpTable()


def _prod(dims: list[Dim]) -> Dim:
    out: Dim = 1
    for d in dims:
        out = out * d
    return out


@OPS.op("reshape", "input, shape, axis_start = 0, axis_count = -1")
def _reshape(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    start, count = a.integer("axis_start"), a.integer("axis_count")
    dims = list(x.shape)
    end = len(dims) if count == -1 else start + count
    part = dims[start:end]
    target = a.dims("shape")
    new: list[Dim] = [part[i] if isinstance(d, int) and d == 0 else d for i, d in enumerate(target)]
    if any(isinstance(d, int) and d == -1 for d in new):
        known = _prod([d for d in new if not (isinstance(d, int) and d == -1)])
        new = [_prod(part) // known if isinstance(d, int) and d == -1 else d for d in new]
    known_value = None
    if x.known is not None:
        known_value = np.asarray(x.known).reshape(-1)
    out = tensor(x.dtype, dims[:start] + new + dims[end:])
    if known_value is not None and all(isinstance(d, int) for d in out.shape):
        return [tensor(x.dtype, out.shape, known_value.reshape([int(d) for d in out.shape]))]
    return [out]


@OPS.op("transpose", "input, axes")
def _transpose(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    axes = a.ints("axes")
    perm = axes + list(range(len(axes), x.rank))
    return [tensor(x.dtype, [x.shape[p] for p in perm])]


@OPS.op("squeeze", "input, axes")
def _squeeze(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    return [via_ir("squeeze", [x], {"axes": tuple(a.ints("axes"))})]


@OPS.op("unsqueeze", "input, axes")
def _unsqueeze(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    return [via_ir("unsqueeze", [x], {"axes": tuple(a.ints("axes"))})]


@OPS.op("concat", "values, axis")
def _concat(a: Args) -> list[TensorVal]:
    xs = a.tensors("values")
    axis = a.integer("axis")
    dims = list(xs[0].shape)
    dims[axis] = sum_dims([x.shape[axis] for x in xs])
    known = None
    if all(x.known is not None for x in xs):
        known = np.concatenate([np.asarray(x.known) for x in xs], axis=axis)
    return [tensor(xs[0].dtype, dims, known)]


def sum_dims(dims: list[Dim]) -> Dim:
    out: Dim = 0
    for d in dims:
        out = out + d
    return out


@OPS.op("stack", "values, axis")
def _stack(a: Args) -> list[TensorVal]:
    xs = a.tensors("values")
    axis = a.integer("axis")
    dims = list(xs[0].shape)
    dims.insert(axis, len(xs))
    return [tensor(xs[0].dtype, dims)]


@OPS.op("unstack", "value, axis")
def _unstack(a: Args) -> list[TensorVal]:
    x = a.tensor("value")
    axis = a.integer("axis")
    n = x.shape[axis]
    if isinstance(n, Sym):
        raise a.fail("unstack needs a static axis")
    dims = [d for i, d in enumerate(x.shape) if i != axis]
    return [tensor(x.dtype, dims) for _ in range(int(n))]


@OPS.op("split", "value, axis, ratios")
def _split(a: Args) -> list[TensorVal]:
    x = a.tensor("value")
    axis, ratios = a.integer("axis"), a.ints("ratios")
    total = sum(ratios)
    out = []
    for r in ratios:
        dims = list(x.shape)
        dims[axis] = dims[axis] * r // total
        out.append(tensor(x.dtype, dims))
    return out


def slice_bounds(dim: Dim, begin: Dim, end: Dim, stride: int) -> Dim:
    """The length NNEF's ``slice`` gives: negative bounds count from the end, an ``end``
    of 0 with a positive stride is the end, bounds are clamped to the axis."""
    if isinstance(begin, int) and begin < 0:
        begin = begin + dim
    if isinstance(end, int) and end == 0 and stride > 0:
        end = dim
    elif isinstance(end, int) and end < 0:
        end = end + dim
    if isinstance(dim, int):
        if isinstance(begin, int):
            begin = min(max(begin, -1), dim)
        if isinstance(end, int):
            end = min(max(end, -1), dim)
    step = abs(stride)
    span = end - begin if stride > 0 else begin - end
    length = (span + (step - 1)) // step
    return max(length, 0) if isinstance(length, int) else length


@OPS.op("slice", "input, axes, begin, end, stride = []")
def _slice(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    axes, begins, ends = a.ints("axes"), a.dims("begin"), a.dims("end")
    strides = a.ints("stride") or [1] * len(axes)
    dims = list(x.shape)
    for ax, b, e, s in zip(axes, begins, ends, strides):
        dims[ax] = slice_bounds(dims[ax], b, e, s)
    known = None
    if x.known is not None and all(isinstance(d, int) for d in dims) and x.rank > 0:
        index = [slice(None)] * x.rank
        for ax, b, e, s in zip(axes, begins, ends, strides):
            if isinstance(b, int) and isinstance(e, int):
                size = np.asarray(x.known).shape[ax]
                bb = b + size if b < 0 else b
                ee = size if e == 0 and s > 0 else (e + size if e < 0 else e)
                index[ax] = slice(bb, ee if ee >= 0 else None, s)
        known = np.asarray(x.known)[tuple(index)]
        if list(known.shape) != dims:
            known = None
    return [tensor(x.dtype, dims, known)]


@OPS.op("tile", "input, repeats")
def _tile(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    return [tensor(x.dtype, [d * r for d, r in zip(x.shape, a.dims("repeats"))])]


@OPS.op("pad", "input, padding, border = 'constant', value = 0.0")
def _pad(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    pads = a.pairs("padding")
    return [tensor(x.dtype, [d + p + q for d, (p, q) in zip(x.shape, pads)])]


@OPS.op("tract_core_broadcast", "input, shape")
def _broadcast(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    return [tensor(x.dtype, broadcast_shapes(x.shape, a.dims("shape")))]


@OPS.op("tract_core_dyn_slice", "input, start, end, axis, len")
def _dyn_slice(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    dims = list(x.shape)
    dims[a.integer("axis")] = a.dim("len")
    return [tensor(x.dtype, dims)]


@OPS.op("tract_core_downsample", "input, axis, stride, modulo = 0")
def _downsample(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    axis, stride, modulo = a.integer("axis"), abs(a.integer("stride")), a.integer("modulo")
    dims = list(x.shape)
    dims[axis] = (dims[axis] - modulo + (stride - 1)) // stride
    return [tensor(x.dtype, dims)]


def _gather(x: TensorVal, idx: TensorVal, axis: int, dtype: DType | None = None) -> TensorVal:
    dims = list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1:])
    known = None
    if x.known is not None and idx.known is not None:
        taken = np.take(np.asarray(x.known), np.asarray(idx.known).astype(np.int64), axis=axis)
        known = np.asarray(taken, dtype=np.asarray(x.known).dtype)
    return tensor(dtype or x.dtype, dims, known)


@OPS.op("gather", "input, indices, axis = 0")
def _gather_std(a: Args) -> list[TensorVal]:
    return [_gather(a.tensor("input"), a.tensor("indices"), a.integer("axis"))]


@OPS.op("tract_core_gather", "input, indices, axis, datum_type = ''")
def _gather_tract(a: Args) -> list[TensorVal]:
    dtype = a.dtype("datum_type") if a.text("datum_type") else None
    return [_gather(a.tensor("input"), a.tensor("indices"), a.integer("axis"), dtype)]


@OPS.op("tract_core_gather_elements", "input, indices, axis")
def _gather_elements(a: Args) -> list[TensorVal]:
    return [tensor(a.tensor("input").dtype, a.tensor("indices").shape)]


@OPS.op("tract_core_gather_nd", "input, indices, batch_dims = 0")
def _gather_nd(a: Args) -> list[TensorVal]:
    x, idx = a.tensor("input"), a.tensor("indices")
    depth = idx.shape[-1]
    if isinstance(depth, Sym):
        raise a.fail("the last axis of the indices must be static")
    b = a.integer("batch_dims")
    return [tensor(x.dtype, list(idx.shape[:-1]) + list(x.shape[b + int(depth):]))]


@OPS.op(["tract_core_scatter_elements", "tract_core_scatter_nd"], "input, indices, updates, axis = 0, reduction = 'none'")
def _scatter(a: Args) -> list[TensorVal]:
    return [TensorVal(a.tensor("input").type)]


@OPS.op("tract_core_one_hot", "input, axis, dim, value_off = 0.0, value_on = 1.0")
def _one_hot(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    dims = list(x.shape)
    dims.insert(a.integer("axis"), a.integer("dim"))
    on = a.raw("value_on")
    dtype = DType.F32 if isinstance(on, float) else (on.dtype if isinstance(on, TensorVal) else DType.I64)
    return [tensor(dtype, dims)]


_fresh = itertools.count()


@OPS.op("tract_core_range", "start, end, step")
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


@OPS.op("tract_core_shape_of", "input")
def _shape_of(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    known = np.empty(x.rank, dtype=object)
    known[:] = list(x.shape)
    return [tensor(DType.I64, [x.rank], known)]


@OPS.op("tract_core_cast", "input, to")
def _cast(a: Args) -> list[TensorVal]:
    to = a.dtype("to")
    x = a.tensor("input", None if not to.is_float else to)
    known = None
    if x.known is not None and not to.is_float:
        k = np.asarray(x.known)
        known = k if k.dtype == object else k.astype(to.numpy)
    return [tensor(to, x.shape, known)]


@OPS.op("cast", "input")
def _cast_generic(a: Args) -> list[TensorVal]:
    """Khronos's ``cast<scalar>`` / ``cast<integer>`` / ``cast<logical>``."""
    x = a.tensor("input")
    to = {"scalar": DType.F32, "integer": DType.I64, "logical": DType.BOOL}.get(a.generic or "", x.dtype)
    return [tensor(to, x.shape)]


@OPS.op(["tract_core_trilu"], "input, k, upper = true")
def _trilu(a: Args) -> list[TensorVal]:
    return [TensorVal(a.tensor("input").type)]


@OPS.op("tract_core_topk", "input, k, axis, largest = true")
def _topk(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    dims = list(x.shape)
    dims[a.integer("axis")] = a.dim("k")
    return [tensor(x.dtype, dims), tensor(DType.I64, dims)]


@OPS.op("tract_core_cumsum", "input, axis, exclusive = false, reverse = false")
def _cumsum(a: Args) -> list[TensorVal]:
    return [TensorVal(a.tensor("input").type)]


def _reduce(dtype: DType | None):  # type: ignore[no-untyped-def]
    def infer(a: Args) -> list[TensorVal]:
        x = a.tensor("input")
        axes = set(a.ints("axes"))
        return [tensor(dtype or x.dtype, [1 if i in axes else d for i, d in enumerate(x.shape)])]

    return infer


OPS.op(["sum_reduce", "mean_reduce"], "input, axes, normalize = false")(_reduce(None))
OPS.op(["max_reduce", "min_reduce", "any_reduce", "all_reduce", "tract_core_product_reduce"],
       "input, axes")(_reduce(None))
OPS.op(["argmax_reduce", "argmin_reduce", "tract_core_argmax_reduce_last", "tract_core_argmin_reduce_last"],
       "input, axes")(_reduce(DType.I64))


@OPS.op("moments", "input, axes")
def _moments(a: Args) -> list[TensorVal]:
    (m,) = _reduce(None)(a)
    return [m, m]


def static_numel(dims: list[Dim]) -> int | None:
    return math.prod(int(d) for d in dims) if all(isinstance(d, int) for d in dims) else None
