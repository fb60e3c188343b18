"""Shape and data-movement operations of standard NNEF, reductions and casts (tract's
are in :mod:`t2n.backends.tract.reader.shape`), with NNEF's conventions (reductions keep their axes, ``reshape``'s 0 and -1, ``slice``
bounds counted from the end when negative)."""

from __future__ import annotations

import math

import numpy as np

from t2n.backends.nnef.reader.infer_elementwise import via_ir
from t2n.backends.nnef.reader.optable import Args, Infer, ReadOpTable, TensorVal, tensor
from t2n.ir import DType, Sym
from t2n.ir.dims import Dim

COMMON = ReadOpTable("shape")


def _prod(dims: list[Dim]) -> Dim:
    out: Dim = 1
    for d in dims:
        out = out * d
    return out


@COMMON.op("reshape", "input, shape, axis_start = 0, axis_count = -1")
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


@COMMON.op("transpose", "input, axes")
def _transpose(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    axes = a.ints("axes")
    perm = axes + list(range(len(axes), x.rank))
    return [tensor(x.dtype, [x.shape[p] for p in perm])]


@COMMON.op("squeeze", "input, axes")
def _squeeze(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    return [via_ir("squeeze", [x], {"axes": tuple(a.ints("axes"))})]


@COMMON.op("unsqueeze", "input, axes")
def _unsqueeze(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    return [via_ir("unsqueeze", [x], {"axes": tuple(a.ints("axes"))})]


@COMMON.op("concat", "values, axis")
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


@COMMON.op("stack", "values, axis")
def _stack(a: Args) -> list[TensorVal]:
    xs = a.tensors("values")
    axis = a.integer("axis")
    dims = list(xs[0].shape)
    dims.insert(axis, len(xs))
    return [tensor(xs[0].dtype, dims)]


@COMMON.op("unstack", "value, axis")
def _unstack(a: Args) -> list[TensorVal]:
    x = a.tensor("value")
    axis = a.integer("axis")
    n = x.shape[axis]
    if isinstance(n, Sym):
        raise a.fail("unstack needs a static axis")
    dims = [d for i, d in enumerate(x.shape) if i != axis]
    return [tensor(x.dtype, dims) for _ in range(int(n))]


@COMMON.op("split", "value, axis, ratios")
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


@COMMON.op("slice", "input, axes, begin, end, stride = []")
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


@COMMON.op("tile", "input, repeats")
def _tile(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    return [tensor(x.dtype, [d * r for d, r in zip(x.shape, a.dims("repeats"))])]


@COMMON.op("pad", "input, padding, border = 'constant', value = 0.0")
def _pad(a: Args) -> list[TensorVal]:
    x = a.tensor("input")
    pads = a.pairs("padding")
    return [tensor(x.dtype, [d + p + q for d, (p, q) in zip(x.shape, pads)])]


def gather_result(x: TensorVal, idx: TensorVal, axis: int, dtype: DType | None = None) -> TensorVal:
    dims = list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1:])
    known = None
    if x.known is not None and idx.known is not None:
        taken = np.take(np.asarray(x.known), np.asarray(idx.known).astype(np.int64), axis=axis)
        known = np.asarray(taken, dtype=np.asarray(x.known).dtype)
    return tensor(dtype or x.dtype, dims, known)


@COMMON.op("gather", "input, indices, axis = 0")
def _gather_std(a: Args) -> list[TensorVal]:
    return [gather_result(a.tensor("input"), a.tensor("indices"), a.integer("axis"))]


@COMMON.op("cast", "input")
def _cast_generic(a: Args) -> list[TensorVal]:
    """Khronos's ``cast<scalar>`` / ``cast<integer>`` / ``cast<logical>``."""
    x = a.tensor("input")
    to = {"scalar": DType.F32, "integer": DType.I64, "logical": DType.BOOL}.get(a.generic or "", x.dtype)
    return [tensor(to, x.shape)]


def reduce_infer(dtype: DType | None) -> Infer:
    """A reduction's inference: the input's type with the reduced axes kept as 1
    (``dtype`` for an arg-reduction)."""

    def infer(a: Args) -> list[TensorVal]:
        x = a.tensor("input")
        axes = set(a.ints("axes"))
        return [tensor(dtype or x.dtype, [1 if i in axes else d for i, d in enumerate(x.shape)])]

    return infer


COMMON.op(["sum_reduce", "mean_reduce"], "input, axes, normalize = false")(reduce_infer(None))
COMMON.op(["max_reduce", "min_reduce", "any_reduce", "all_reduce"], "input, axes")(reduce_infer(None))
COMMON.op(["argmax_reduce", "argmin_reduce"], "input, axes")(reduce_infer(DType.I64))


@COMMON.op("moments", "input, axes")
def _moments(a: Args) -> list[TensorVal]:
    (m,) = reduce_infer(None)(a)
    return [m, m]


def static_numel(dims: list[Dim]) -> int | None:
    return math.prod(int(d) for d in dims) if all(isinstance(d, int) for d in dims) else None
