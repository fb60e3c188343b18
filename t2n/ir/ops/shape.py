"""Shape and data-movement ops.

Sizes that may depend on input shapes (reshape targets, slice bounds, expand and
tile sizes) are *operands*, 1-D i64 tensors, so that dynamic axes flow through
them; fixed hyper-parameters (axes, permutations, steps) are attributes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from t2n.ir.attributes import FLOAT, INT, INTS, NO_ATTRS, PAIRS, STR, optional, required
from t2n.ir.dims import Dim, Sym, as_dim, data_dim
from t2n.ir.dtypes import DType
from t2n.ir.infer_utils import (
    InferError,
    broadcast_dims,
    known_dims,
    norm_axis,
    same_dtype,
    slice_dim,
    tensor,
)
from t2n.ir.schema import InferContext, OpTable
from t2n.ir.types import Shape, TensorType

TABLE = OpTable("shape")


def reshape_target(in_shape: Sequence[Dim], target: Sequence[Dim]) -> Shape:
    """Resolve one ``-1`` in ``target`` against the element count of ``in_shape``."""
    target = list(target)
    holes = [i for i, d in enumerate(target) if isinstance(d, int) and d == -1]
    if len(holes) > 1:
        raise InferError(f"reshape: more than one -1 in {target}")
    if holes:
        known: Dim = 1
        for i, d in enumerate(target):
            if i != holes[0]:
                known = known * d
        numel: Dim = 1
        for d in in_shape:
            numel = numel * d
        if known == 0:
            target[holes[0]] = 0
        else:
            target[holes[0]] = numel // known
    out = Shape(target)
    if Shape(in_shape).is_static and out.is_static and Shape(in_shape).numel != out.numel:
        raise InferError(f"reshape: {list(in_shape)} has {Shape(in_shape).numel} elements, "
                         f"target {list(out)} has {out.numel}")
    return out


def _eval_reshape(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
    shape = [int(d) for d in np.asarray(xs[1]).reshape(-1)]
    return [np.reshape(xs[0], shape)]


@TABLE.op("reshape", evaluate=_eval_reshape, attrs=NO_ATTRS)
def _reshape(ctx: InferContext) -> list[TensorType]:
    """reshape(x, shape): ``shape`` is a known 1-D i64 operand; one entry may be -1."""
    target = known_dims(ctx, 1, "reshape target shape")
    return [ctx.types[0].with_shape(reshape_target(ctx.types[0].shape, target))]


@TABLE.op("transpose", evaluate=lambda xs, a: [np.transpose(xs[0], a["perm"])], attrs={"perm": required(INTS)})
def _transpose(ctx: InferContext) -> list[TensorType]:
    """Permute axes: output axis i is input axis perm[i]."""
    perm = ctx.attrs["perm"]
    shape = ctx.types[0].shape
    if sorted(perm) != list(range(len(shape))):
        raise InferError(f"transpose: {perm} is not a permutation of rank {len(shape)}")
    return [ctx.types[0].with_shape([shape[p] for p in perm])]


@TABLE.op("squeeze", evaluate=lambda xs, a: [np.squeeze(xs[0], tuple(a["axes"]))], attrs={"axes": required(INTS)})
def _squeeze(ctx: InferContext) -> list[TensorType]:
    """Remove the listed size-1 axes (non-negative)."""
    shape = ctx.types[0].shape
    axes = ctx.attrs["axes"]
    for ax in axes:
        if shape[ax] != 1 and not isinstance(shape[ax], Sym):
            raise InferError(f"squeeze: axis {ax} has size {shape[ax]}")
    return [ctx.types[0].with_shape([d for i, d in enumerate(shape) if i not in axes])]


def _unsqueeze_shape(shape: Sequence[Dim], axes: Sequence[int]) -> list[Dim]:
    out = list(shape)
    for ax in sorted(axes):
        out.insert(ax, 1)
    return out


@TABLE.op(
    "unsqueeze",
    evaluate=lambda xs, a: [np.reshape(xs[0], _unsqueeze_shape(xs[0].shape, a["axes"]))],
    attrs={"axes": required(INTS)},
)
def _unsqueeze(ctx: InferContext) -> list[TensorType]:
    """Insert size-1 axes at the listed (output) positions."""
    return [ctx.types[0].with_shape(_unsqueeze_shape(ctx.types[0].shape, ctx.attrs["axes"]))]


@TABLE.op("concat", evaluate=lambda xs, a: [np.concatenate(xs, axis=a["axis"])], attrs={"axis": required(INT)})
def _concat(ctx: InferContext) -> list[TensorType]:
    """Join inputs along ``axis`` (non-negative); inputs share a dtype."""
    dtype = same_dtype(ctx, "concat")
    axis = ctx.attrs["axis"]
    first = list(ctx.types[0].shape)
    total: Dim = 0
    for t in ctx.types:
        if len(t.shape) != len(first):
            raise InferError("concat: ranks differ")
        for i, (a, b) in enumerate(zip(first, t.shape)):
            if i != axis and isinstance(a, int) and isinstance(b, int) and a != b:
                raise InferError(f"concat: axis {i} has sizes {a} and {b}")
        total = total + t.shape[axis]
    first[axis] = total
    return [tensor(dtype, first)]


def _eval_slice(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
    x = xs[0]
    index = [slice(None)] * x.ndim
    begins = np.asarray(xs[1]).reshape(-1).tolist()
    ends = np.asarray(xs[2]).reshape(-1).tolist()
    for ax, b, e, s in zip(a["axes"], begins, ends, a["steps"]):
        index[ax] = slice(int(b), int(e), int(s))
    return [x[tuple(index)]]


@TABLE.op("slice", evaluate=_eval_slice, attrs={"axes": required(INTS), "steps": required(INTS)})
def _slice(ctx: InferContext) -> list[TensorType]:
    """slice(x, begin, end; axes, steps): python-style bounds (negative from the end,
    clamped, INT64_MAX for "to the end"); begin/end are known 1-D i64 operands."""
    shape = list(ctx.types[0].shape)
    begins = known_dims(ctx, 1, "slice begin")
    ends = known_dims(ctx, 2, "slice end")
    for ax, b, e, s in zip(ctx.attrs["axes"], begins, ends, ctx.attrs["steps"]):
        shape[ax] = slice_dim(shape[ax], b, e, int(s))[2]
    return [tensor(ctx.types[0].dtype, shape)]


def _expand_shape(in_shape: Sequence[Dim], target: Sequence[Dim]) -> list[Dim]:
    lead = len(target) - len(in_shape)
    if lead < 0:
        raise InferError(f"expand: target {list(target)} has lower rank than {list(in_shape)}")
    out: list[Dim] = []
    for i, t in enumerate(target):
        src = in_shape[i - lead] if i >= lead else 1
        if isinstance(t, int) and t == -1:
            out.append(src)
        elif isinstance(src, int) and isinstance(t, int):
            out.append(broadcast_dims(src, t))
        else:
            # the target size is the output size whenever the expand is valid (the
            # source is 1 or already that size): never the source's size instead
            out.append(t)
    return out


@TABLE.op(
    "expand",
    evaluate=lambda xs, a: [
        np.broadcast_to(
            xs[0], [int(d) for d in _expand_shape(xs[0].shape, np.asarray(xs[1]).tolist())]
        ).copy()
    ],
    attrs=NO_ATTRS,
)
def _expand(ctx: InferContext) -> list[TensorType]:
    """Broadcast to ``shape`` (known 1-D i64 operand; -1 keeps the input size)."""
    target = known_dims(ctx, 1, "expand shape")
    return [ctx.types[0].with_shape(_expand_shape(ctx.types[0].shape, target))]


@TABLE.op("tile", evaluate=lambda xs, a: [np.tile(xs[0], [int(r) for r in np.asarray(xs[1]).tolist()])],
          attrs=NO_ATTRS)
def _tile(ctx: InferContext) -> list[TensorType]:
    """Repeat the whole tensor ``repeats[i]`` times along axis i (operand, same rank)."""
    reps = known_dims(ctx, 1, "tile repeats")
    shape = ctx.types[0].shape
    if len(reps) != len(shape):
        raise InferError("tile: repeats must match the rank")
    return [ctx.types[0].with_shape([d * r for d, r in zip(shape, reps)])]


def _shape_array(shape: Sequence[Dim]) -> np.ndarray:
    if all(isinstance(d, int) for d in shape):
        return np.asarray(list(shape), dtype=np.int64).reshape(len(shape))
    out = np.empty(len(shape), dtype=object)
    out[:] = list(shape)
    return out


@TABLE.op(
    "shape_of",
    evaluate=lambda xs, a: [np.asarray(xs[0].shape, dtype=np.int64)],
    known=lambda ctx: [_shape_array(ctx.types[0].shape)],
    attrs=NO_ATTRS,
)
def _shape_of(ctx: InferContext) -> list[TensorType]:
    """The input's shape as a 1-D i64 tensor (symbolic entries where the shape is)."""
    return [tensor(DType.I64, [len(ctx.types[0].shape)])]


def _eval_pad(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
    pads = [(int(p[0]), int(p[1])) for p in a["pads"]]
    if a["mode"] == "constant":
        return [np.pad(xs[0], pads, mode="constant", constant_values=a["value"])]
    mode: Any = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[a["mode"]]
    return [np.pad(xs[0], pads, mode=mode)]


@TABLE.op("pad", evaluate=_eval_pad,
          attrs={"pads": required(PAIRS), "mode": required(STR), "value": optional(FLOAT, 0.0)})
def _pad(ctx: InferContext) -> list[TensorType]:
    """Pad each axis by (before, after) (attr pads); mode constant/reflect/replicate/circular."""
    shape = ctx.types[0].shape
    pads = ctx.attrs["pads"]
    if len(pads) != len(shape):
        raise InferError("pad: one (before, after) pair per axis")
    return [ctx.types[0].with_shape([d + b + e for d, (b, e) in zip(shape, pads)])]


@TABLE.op("gather", evaluate=lambda xs, a: [np.take(xs[0], xs[1], axis=a["axis"])], attrs={"axis": required(INT)})
def _gather(ctx: InferContext) -> list[TensorType]:
    """numpy ``take`` along ``axis``; indices are in range and non-negative."""
    x, idx = ctx.types
    if not idx.dtype.is_int:
        raise InferError("gather: indices must be integers")
    axis = norm_axis(ctx.attrs["axis"], x.rank)
    shape = list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1 :])
    return [tensor(x.dtype, shape)]


def _eval_range(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
    start, end, step = (x.item() for x in xs)
    return [np.arange(start, end, step, dtype=xs[0].dtype)]


@TABLE.op("range", evaluate=_eval_range, attrs={"data_dim": optional(STR)})
def _range(ctx: InferContext) -> list[TensorType]:
    """1-D arange(start, end, step) from three 0-d operands of one dtype. Bounds computed
    from tensor data need attr ``data_dim`` (a tag unique in the graph): the length is
    then the data dimension of that tag (:func:`t2n.ir.dims.data_dim`)."""
    dtype = same_dtype(ctx, "range")
    ks = [ctx.known_or_none(i) for i in range(3)]
    if all(k is not None for k in ks):
        start, end, step = (as_dim(np.asarray(k).item()) if np.asarray(k).dtype.kind in "iuO" else float(np.asarray(k).item()) for k in ks)  # type: ignore[union-attr]
        if isinstance(step, int) and step > 0 and not isinstance(start, float) and not isinstance(end, float):
            length: Dim = (end - start + step - 1) // step
        else:
            length = int(max(0, -(-(float(end) - float(start)) // float(step))))  # type: ignore[arg-type]
        return [tensor(dtype, [length])]
    if ctx.attrs.get("data_dim"):
        return [tensor(dtype, [data_dim(ctx.attrs["data_dim"])])]
    raise InferError("range: bounds must be known when the graph is built")


@TABLE.op("reverse", evaluate=lambda xs, a: [np.flip(xs[0], tuple(a["axes"])).copy()], attrs={"axes": required(INTS)})
def _reverse(ctx: InferContext) -> list[TensorType]:
    """Reverse the order of elements along each of ``axes`` (non-negative); torch.flip.
    An op of its own because a negative-step slice needs bounds tract cannot take."""
    for ax in ctx.attrs["axes"]:
        if not 0 <= ax < ctx.types[0].rank:
            raise InferError(f"reverse: axis {ax} out of range for rank {ctx.types[0].rank}")
    return [ctx.types[0]]
