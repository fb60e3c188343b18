"""Writes by position: the in-place copies and fills that slice assignment traces to
(``copy_``, ``fill_``), slice/select scatters, scatters with reductions, ``index_add``/
``index_copy``/``index_fill`` and ``index_put``.

Indices are normalized (``i < 0 → i + n``) before they reach a scatter: tract does not
wrap negative indices and aborts on an out-of-range scatter index.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from t2n.frontend.context import LoweringContext
from t2n.frontend.helpers import dim_value, dims_product, reshape, transpose, unsqueeze
from t2n.frontend.lowering.index import (
    broadcast_all,
    full_like,
    index_tensors,
    normalized,
    positions,
)
from t2n.frontend.registry import RuleSet
from t2n.frontend.views import slice_scatter
from t2n.ir import Dim, DType, Value

RULES = RuleSet("scatter")

@RULES.rule("aten::copy_", "aten::copy")
def copy_(ctx: LoweringContext) -> Value:
    """The destination's shape and dtype, the source's values (the write into the
    destination, a view, is done by the alias tracking of the lowering driver)."""
    x = ctx.tensor(0)
    src = ctx.tensor(1, x.type.dtype)
    if list(src.type.shape) == list(x.type.shape):
        return src
    return ctx.b.op("expand", src, ctx.b.op("shape_of", x))


@RULES.rule("aten::fill_", "aten::fill", "aten::zero_", "aten::zero")
def fill_(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    return full_like(ctx, x, 0 if "zero" in ctx.kind else ctx.raw(1))


@RULES.rule("aten::slice_scatter")
def slice_scatter_rule(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    return slice_scatter_into(ctx, x, ctx.tensor(1, x.type.dtype), ctx.axis(2, x.rank) if ctx.n_inputs > 2 else 0)


def slice_scatter_into(ctx: LoweringContext, x: Value, src: Value, axis: int) -> Value:
    """``x`` with its slice (the node's bounds) on ``axis`` replaced by ``src`` (also the
    complex rule's, on (re, im) pairs)."""
    start = ctx.optional(3) if ctx.n_inputs > 3 else None
    end = ctx.optional(4) if ctx.n_inputs > 4 else None
    step = ctx.int(5) if ctx.n_inputs > 5 else 1
    if not all(isinstance(v, (int, type(None))) for v in (start, end)):
        raise ctx.unsupported("slice_scatter with bounds computed at run time")
    from t2n.ir.infer_utils import INT64_MAX

    return slice_scatter(ctx.b, x, src, axis, start or 0, INT64_MAX if end is None else end, step)


@RULES.rule("aten::select_scatter")
def select_scatter(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    return select_scatter_into(ctx, x, ctx.tensor(1, x.type.dtype), ctx.axis(2, x.rank))


def select_scatter_into(ctx: LoweringContext, x: Value, src: Value, axis: int) -> Value:
    """``x`` with its entry at the node's index on ``axis`` replaced by ``src`` (also the
    complex rule's, on (re, im) pairs)."""
    i = ctx.int(3)
    n = x.type.shape[axis]
    if i < 0:
        if not isinstance(n, int):
            raise ctx.unsupported("select_scatter with a negative index on a dynamic axis")
        i += n
    return slice_scatter(ctx.b, x, unsqueeze(ctx.b, src, [axis]), axis, i, i + 1, 1)


def _scatter_reduction(ctx: LoweringContext, name: str) -> str:
    table = {"add": "add", "sum": "add", "multiply": "mul", "prod": "mul", "amax": "max", "amin": "min"}
    if name not in table:
        raise ctx.unsupported(f"scatter reduction {name!r}")
    return table[name]


@RULES.rule("aten::scatter", "aten::scatter_", "aten::scatter_add", "aten::scatter_add_")
def scatter(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    axis = ctx.axis(1, x.rank)
    idx = normalized(ctx.b, ctx.tensor(2), dim_value(ctx.b, x, axis))
    src = ctx.raw(3)
    if isinstance(src, Value) and src.rank == x.rank:
        upd = ctx.b.cast(src, x.type.dtype)
        if list(upd.type.shape) != list(idx.type.shape):
            upd = ctx.b.op("slice", upd, ctx.b.ints([0] * x.rank), ctx.b.ints(list(idx.type.shape)),
                           axes=tuple(range(x.rank)), steps=(1,) * x.rank)
    else:
        upd = ctx.b.op("expand", reshape(ctx.b, ctx.as_value(src, x.type.dtype), []),
                       ctx.b.op("shape_of", idx))
    reduction = "none"
    if "scatter_add" in ctx.kind:
        reduction = "add"
    elif ctx.has("reduce") and not ctx.is_none("reduce"):
        reduction = _scatter_reduction(ctx, ctx.const("reduce"))
    return ctx.b.op("scatter_elements", x, idx, upd, axis=axis, reduction=reduction)


@RULES.rule("aten::scatter_reduce", "aten::scatter_reduce_")
def scatter_reduce(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    b = ctx.b
    axis = ctx.axis(1, x.rank)
    idx = normalized(b, ctx.tensor(2), dim_value(b, x, axis))
    src = ctx.tensor(3, x.type.dtype)
    how = ctx.const(4)
    include_self = ctx.bool(5) if ctx.n_inputs > 5 else True
    if how == "mean":
        if not x.type.dtype.is_float:
            raise ctx.unsupported("scatter_reduce 'mean' on integers (PyTorch floors the mean)")
        zeros, ones = full_like(ctx, idx, 0, x.type.dtype), full_like(ctx, idx, 1, x.type.dtype)
        base = x if include_self else b.op("scatter_elements", x, idx, zeros, axis=axis, reduction="none")
        total = b.op("scatter_elements", base, idx, src, axis=axis, reduction="add")
        count0 = full_like(ctx, x, 1)
        if not include_self:
            count0 = b.op("scatter_elements", count0, idx, zeros, axis=axis, reduction="none")
        count = b.op("scatter_elements", count0, idx, ones, axis=axis, reduction="add")
        return b.op("div", total, count)
    red = _scatter_reduction(ctx, how)
    if not include_self:
        ident: float | int
        dt = x.type.dtype
        if red == "add":
            ident = 0
        elif red == "mul":
            ident = 1
        else:
            info = np.finfo(dt.numpy) if dt.is_float else np.iinfo(dt.numpy)
            ident = float("-inf") if red == "max" and dt.is_float else float("inf") if dt.is_float \
                else int(info.min if red == "max" else info.max)
        x = b.op("scatter_elements", x, idx, full_like(ctx, idx, ident, x.type.dtype), axis=axis,
                 reduction="none")
    return b.op("scatter_elements", x, idx, src, axis=axis, reduction=red)


def _along(ctx: LoweringContext, idx: Value, like: Value, axis: int) -> Value:
    """A 1-D index along ``axis`` expanded to the shape of ``like``."""
    shape: list[Dim] = [1] * like.rank
    shape[axis] = idx.type.shape[0]
    return ctx.b.op("expand", reshape(ctx.b, idx, shape), ctx.b.op("shape_of", like))


@RULES.rule("aten::index_add", "aten::index_add_", "aten::index_copy", "aten::index_copy_")
def index_add(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    axis = ctx.axis(1, x.rank)
    idx = ctx.tensor(2)
    if idx.rank == 0:
        idx = reshape(ctx.b, idx, [1])
    src = ctx.tensor(3, x.type.dtype)
    if src.rank == x.rank - 1 or src.rank == 0:
        src = unsqueeze(ctx.b, src, [axis]) if x.rank else src
    idx = normalized(ctx.b, idx, dim_value(ctx.b, x, axis))
    if "add" in ctx.kind:
        alpha = ctx.raw("alpha") if ctx.has("alpha") else 1
        if alpha != 1:
            src = ctx.b.op("mul", src, ctx.as_value(alpha, x.type.dtype))
        return ctx.b.op("scatter_elements", x, _along(ctx, idx, src, axis), src, axis=axis, reduction="add")
    return ctx.b.op("scatter_elements", x, _along(ctx, idx, src, axis), src, axis=axis, reduction="none")


@RULES.rule("aten::index_fill", "aten::index_fill_")
def index_fill(ctx: LoweringContext) -> Value:
    """A mask along one axis from comparing positions with the indices (both engines)."""
    x = ctx.tensor(0)
    b = ctx.b
    axis = ctx.axis(1, max(x.rank, 1))
    idx = ctx.tensor(2)
    n = dim_value(b, x, axis)
    idx = reshape(b, normalized(b, idx, n), [dims_product(idx.type.shape)])
    hit = b.op("any_reduce", b.op("eq", unsqueeze(b, positions(b, n), [1]), unsqueeze(b, idx, [0])),
               axes=(1,), keepdims=False)
    shape: list[Dim] = [1] * x.rank
    shape[axis] = x.type.shape[axis]
    value = ctx.as_value(ctx.raw(3), x.type.dtype)
    if value.rank:
        value = reshape(b, value, [])
    return b.op("select", reshape(b, hit, shape), value, x)


@RULES.rule("aten::index_put", "aten::index_put_", "aten::_index_put_impl_", "aten::_unsafe_index_put")
def index_put(ctx: LoweringContext) -> Value:
    """Integer indices: the indexed axes moved first, one ScatterND, moved back."""
    x = ctx.tensor(0)
    b = ctx.b
    items = list(ctx.raw(1))
    values = ctx.tensor(2, x.type.dtype)
    accumulate = ctx.bool(3) if ctx.n_inputs > 3 else False
    if any(isinstance(v, Value) and v.type.dtype in (DType.BOOL, DType.U8) for v in items):
        return _masked_put(ctx, x, items, values, accumulate)
    found = index_tensors(ctx, x, items)
    if not found:
        full = b.op("expand", values, b.op("shape_of", x))
        return b.op("add", x, full) if accumulate else full
    axes = [a for a, _ in found]
    rest = [a for a in range(x.rank) if a not in axes]
    perm = axes + rest
    xt = transpose(b, x, perm)
    idx = broadcast_all(ctx, [normalized(b, v, dim_value(b, x, a)) for a, v in found])
    nb = idx[0].rank
    batch = list(idx[0].type.shape)
    rest_dims = [x.type.shape[a] for a in rest]
    adjacent = axes == list(range(axes[0], axes[0] + len(axes)))
    first = axes[0] if adjacent else 0
    # values broadcast to the shape PyTorch gives x[indices], then laid out as batch + rest
    torch_shape = rest_dims[:first] + batch + rest_dims[first:]
    if list(values.type.shape) != torch_shape:
        values = b.op("expand", values, b.ints(torch_shape))
    if first:
        vperm = list(range(first, first + nb)) + list(range(first)) + list(range(first + nb, len(torch_shape)))
        values = transpose(b, values, vperm)
    nd = b.op("concat", *[unsqueeze(b, v, [nb]) for v in idx], axis=nb)
    out = b.op("scatter_nd", xt, nd, values, reduction="add" if accumulate else "none")
    return transpose(b, out, [perm.index(i) for i in range(len(perm))])


def _masked_put(ctx: LoweringContext, x: Value, items: list[Any], values: Value, accumulate: bool) -> Value:
    """``x[mask] = v`` with a single value: a ``where`` (shapes stay static)."""
    b = ctx.b
    if len([v for v in items if v is not None]) != 1 or items[0] is None:
        raise ctx.unsupported("index_put with a boolean mask among other indices")
    mask = b.cast(items[0], DType.BOOL)
    trailing = x.rank - mask.rank
    dims = list(values.type.shape)
    while len(dims) > trailing and isinstance(dims[0], int) and dims[0] == 1:
        dims = dims[1:]
    if len(dims) > trailing:
        raise ctx.unsupported("x[mask] = tensor: the number of selected elements depends on the data; "
                              "use torch.where(mask, values, x)")
    # one value per selected element's trailing axes: it broadcasts like a where
    v = reshape(b, values, dims) if dims != list(values.type.shape) else values
    mask = unsqueeze(b, mask, list(range(mask.rank, x.rank)))
    if accumulate:
        return b.op("add", x, b.op("select", mask, v, ctx.as_value(0, x.type.dtype)))
    return b.op("select", mask, v, x)
