"""Indexing: where/masked_fill, gathers (embedding, index_select, gather, advanced
indexing), triangular masks, diagonals and masked selections (writes by index are in
:mod:`t2n.frontend.lowering.scatter`).

Indices are normalized (``i < 0 → i + n``) before they reach a gather or scatter:
tract does not wrap negative indices and aborts on an out-of-range scatter index.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from t2n.frontend.context import LoweringContext, UnsupportedHere
from t2n.frontend.helpers import dim_value, dims_product, i64, reshape, transpose, unsqueeze
from t2n.frontend.lowering.folding import fold
from t2n.frontend.lowering.rearrange import repeat_indices
from t2n.frontend.registry import RuleSet
from t2n.ir import Builder, DType, Value

RULES = RuleSet("index")


# -- small IR idioms ---------------------------------------------------------------
def normalized(b: Builder, idx: Value, n: Value) -> Value:
    """Indices with negative entries counted from the end (``n`` is the axis size)."""
    idx = b.cast(idx, DType.I64) if idx.type.dtype is not DType.I64 else idx
    if idx.known is not None and idx.known.dtype != object and (idx.known >= 0).all():
        return idx
    return b.op("select", b.op("lt", idx, i64(b, 0)), b.op("add", idx, n), idx)


def positions(b: Builder, n: Value) -> Value:
    """``arange(n)`` as i64 (n may be symbolic)."""
    return b.op("range", i64(b, 0), n, i64(b, 1))


def full_like(ctx: LoweringContext, x: Value, value: Any, dtype: DType | None = None) -> Value:
    """``value`` in ``x``'s shape (and ``x``'s dtype unless given)."""
    v = ctx.as_value(value, dtype or x.type.dtype)
    if v.rank:
        v = reshape(ctx.b, v, [])
    return ctx.b.op("expand", v, ctx.b.op("shape_of", x))


# -- where and masks ---------------------------------------------------------------
@RULES.rule("aten::where")
def where(ctx: LoweringContext) -> Value | list[Value]:
    if ctx.n_inputs == 1:  # where(condition): nonzero(condition, as_tuple=True)
        return nonzero_numpy(ctx)
    cond = ctx.tensor(0)
    if cond.type.dtype is not DType.BOOL:
        cond = ctx.b.cast(cond, DType.BOOL)
    x, y = ctx.promoted(ctx.raw(1), ctx.raw(2))
    return ctx.b.op("select", cond, x, y)


@RULES.rule("aten::masked_fill", "aten::masked_fill_")
def masked_fill(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    mask = ctx.tensor(1)
    if mask.type.dtype is not DType.BOOL:
        mask = ctx.b.cast(mask, DType.BOOL)
    value = ctx.as_value(ctx.raw(2), x.type.dtype)
    if value.rank:
        value = reshape(ctx.b, value, [])
    out = ctx.b.op("select", mask, value, x)
    if ctx.kind == "aten::masked_fill_" and list(out.type.shape) != list(x.type.shape):
        raise ctx.unsupported("the mask broadcasts the tensor to a larger shape")
    return out  # out of place, the result takes the broadcast shape, as in PyTorch


@RULES.rule("aten::tril", "aten::tril_", "aten::triu", "aten::triu_")
def trilu(ctx: LoweringContext) -> Value:
    """A mask from ``range`` and a comparison of the last two axes (sizes may be
    symbolic): keep ``col - row <= k`` (tril) or ``>= k`` (triu)."""
    x = ctx.tensor(0)
    k = ctx.int(1) if ctx.n_inputs > 1 else 0
    b = ctx.b
    if x.rank < 2:
        raise ctx.unsupported("tril/triu needs at least two dimensions")
    rows = unsqueeze(b, positions(b, dim_value(b, x, x.rank - 2)), [1])
    cols = unsqueeze(b, positions(b, dim_value(b, x, x.rank - 1)), [0])
    diff = b.op("sub", cols, rows)
    keep = b.op("le" if "tril" in ctx.kind else "ge", diff, i64(b, k))
    zero = ctx.as_value(False if x.type.dtype is DType.BOOL else 0, x.type.dtype)
    return b.op("select", keep, x, zero)


@RULES.rule("aten::one_hot")
def one_hot(ctx: LoweringContext) -> Value:
    idx = ctx.tensor(0, DType.I64)
    n = ctx.int(1) if ctx.n_inputs > 1 else -1
    if n < 0:
        raise ctx.unsupported("one_hot without num_classes: the class count depends on the data")
    hit = ctx.b.op("eq", unsqueeze(ctx.b, idx, [idx.rank]), positions(ctx.b, i64(ctx.b, n)))
    return ctx.b.cast(hit, DType.I64)


# -- gathers -------------------------------------------------------------------------
@RULES.rule("aten::embedding")
def embedding(ctx: LoweringContext) -> Value:
    weight = ctx.tensor(0)
    idx = ctx.tensor(1)  # PyTorch refuses negative indices here: nothing to normalize
    return ctx.b.op("gather", weight, idx, axis=0)


@RULES.rule("aten::index_select")
def index_select(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    if x.rank == 0:
        return x
    return select_indices(ctx, x, ctx.axis(1, x.rank), ctx.tensor(2))


def select_indices(ctx: LoweringContext, x: Value, axis: int, idx: Value) -> Value:
    """``index_select`` of ``x`` on ``axis`` (also the complex rule's, on the (re, im) pair)."""
    if idx.rank == 0:
        idx = reshape(ctx.b, idx, [1])
    return ctx.b.op("gather", x, normalized(ctx.b, idx, dim_value(ctx.b, x, axis)), axis=axis)


@RULES.rule("aten::take")
def take(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    flat = reshape(ctx.b, x, [dims_product(x.type.shape)])
    return ctx.b.op("gather", flat, normalized(ctx.b, ctx.tensor(1), dim_value(ctx.b, flat, 0)), axis=0)


def gather_elements(ctx: LoweringContext, x: Value, axis: int, idx: Value) -> Value:
    b = ctx.b
    idx = normalized(b, idx, dim_value(b, x, axis))
    # torch.gather lets the indices be smaller than the input off the gathered axis
    for ax in range(x.rank):
        if ax != axis and x.type.shape[ax] != idx.type.shape[ax]:
            x = b.op("slice", x, b.ints([0]), b.ints([idx.type.shape[ax]]), axes=(ax,), steps=(1,))
    return b.op("gather_elements", x, idx, axis=axis)


@RULES.rule("aten::gather")
def gather(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    axis = ctx.axis(1, max(x.rank, 1))
    idx = ctx.tensor(2)
    if x.rank == 0:
        return x
    return gather_elements(ctx, x, axis, idx)


@RULES.rule("aten::take_along_dim")
def take_along_dim(ctx: LoweringContext) -> Value:
    x, idx = ctx.tensor(0), ctx.tensor(1)
    if ctx.n_inputs < 3 or ctx.is_none(2):
        flat = reshape(ctx.b, x, [dims_product(x.type.shape)])
        return gather_elements(ctx, flat, 0, reshape(ctx.b, idx, [dims_product(idx.type.shape)]))
    axis = ctx.axis(2, x.rank)
    # broadcast every axis but the gathered one
    xs, ids = list(x.type.shape), list(idx.type.shape)
    if len(xs) != len(ids):
        raise ctx.unsupported("take_along_dim with indices of another rank")
    x_dims = [d if ax == axis else (ids[ax] if d == 1 else d) for ax, d in enumerate(xs)]
    i_dims = [d if ax == axis else (xs[ax] if d == 1 else d) for ax, d in enumerate(ids)]
    if x_dims != xs:
        x = ctx.b.op("expand", x, ctx.b.ints(x_dims))
    if i_dims != ids:
        idx = ctx.b.op("expand", idx, ctx.b.ints(i_dims))
    return gather_elements(ctx, x, axis, idx)


def index_tensors(ctx: LoweringContext, x: Value, items: list[Any]) -> list[tuple[int, Value]]:
    """(axis, i64 index tensor) for each tensor in an advanced index; a boolean mask
    becomes the positions of its True elements along each of its axes (constants when
    the mask is known at export time)."""
    out: list[tuple[int, Value]] = []
    axis = 0
    for item in items:
        if item is None:
            axis += 1
            continue
        v = ctx.as_value(item)
        if v.type.dtype in (DType.BOOL, DType.U8):
            if v.known is None:  # the True elements' coordinates, counted while running
                out.extend((axis + k, c) for k, c in enumerate(_coordinates(ctx, v)))
            else:
                for k, pos in enumerate(np.nonzero(np.asarray(v.known))):
                    out.append((axis + k, ctx.b.const(pos.astype(np.int64), DType.I64)))
            axis += v.rank
            continue
        out.append((axis, v))
        axis += 1
    if axis > x.rank:
        raise ctx.unsupported(f"too many indices for a tensor of rank {x.rank}")
    return out


def broadcast_all(ctx: LoweringContext, vals: list[Value]) -> list[Value]:
    """Index tensors broadcast against each other. The common shape is read from the
    graph (the shape of their zero-times sum), so sizes that follow a dynamic axis keep
    following it (masks such as ``pad[batch_idx, kv_idx]`` in transformers)."""
    shapes = [list(v.type.shape) for v in vals]
    if all(s == shapes[0] for s in shapes):
        return vals
    b = ctx.b
    vals = [b.cast(v, DType.I64) if v.type.dtype is not DType.I64 else v for v in vals]
    acc: Value | None = None
    for v in vals:
        z = b.op("mul", v, i64(b, 0))
        acc = z if acc is None else b.op("add", acc, z)
    assert acc is not None
    target = b.op("shape_of", acc)
    return [v if list(v.type.shape) == list(acc.type.shape) else b.op("expand", v, target) for v in vals]


def _front(ctx: LoweringContext, x: Value, axes: list[int]) -> tuple[Value, bool]:
    """Move ``axes`` (in order) to the front unless they are already adjacent; says
    whether they moved (PyTorch then puts the broadcast index axes first)."""
    if axes == list(range(axes[0], axes[0] + len(axes))):
        return x, False
    perm = axes + [a for a in range(x.rank) if a not in axes]
    return transpose(ctx.b, x, perm), True


def flat_index(ctx: LoweringContext, x: Value, first: int, idx: list[Value]) -> Value:
    """One index into the axes ``first…first+len(idx)-1`` merged (row-major)."""
    b = ctx.b
    flat = None
    for k, v in enumerate(idx):
        v = normalized(b, v, dim_value(b, x, first + k))
        flat = v if flat is None else b.op("add", b.op("mul", flat, dim_value(b, x, first + k)), v)
    assert flat is not None
    return flat


@RULES.rule("aten::index", "aten::_unsafe_index")
def index(ctx: LoweringContext) -> Value:
    return advanced_index(ctx, ctx.tensor(0), list(ctx.raw(1)))


def advanced_index(ctx: LoweringContext, x: Value, items: list[Any]) -> Value:
    """``x[items]`` (tensors, None for a whole axis, masks known at export). The indices
    address leading axes only, so the complex rule runs this on the (re, im) pair."""
    found = index_tensors(ctx, x, items)
    if not found:
        return x
    axes = [a for a, _ in found]
    x, moved = _front(ctx, x, axes)
    first = 0 if moved else axes[0]
    idx = broadcast_all(ctx, [v for _, v in found])
    if len(idx) == 1:
        return ctx.b.op("gather", x, normalized(ctx.b, idx[0], dim_value(ctx.b, x, first)), axis=first)
    k = len(idx)
    b = ctx.b
    sizes = [dim_value(b, x, a) for a in range(x.rank)]  # read from the graph: dynamic-safe
    joint = sizes[first]
    for d in sizes[first + 1:first + k]:
        joint = b.op("mul", joint, d)
    merged = b.op("reshape", x, ctx.shape_tensor(sizes[:first] + [joint] + sizes[first + k:]))
    return b.op("gather", merged, flat_index(ctx, x, first, idx), axis=first)


# -- diagonals -----------------------------------------------------------------------
@RULES.rule("aten::diagonal")
def diagonal(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    offset = ctx.int(1) if ctx.n_inputs > 1 else 0
    d1 = ctx.axis(2, x.rank) if ctx.n_inputs > 2 else 0
    d2 = ctx.axis(3, x.rank) if ctx.n_inputs > 3 else 1
    return take_diagonal(ctx, x, offset, d1, d2)


def take_diagonal(ctx: LoweringContext, x: Value, offset: int, d1: int, d2: int) -> Value:
    """The two axes moved last and merged; the diagonal is then a strided slice."""
    b = ctx.b
    h, w = x.type.shape[d1], x.type.shape[d2]
    if not isinstance(h, int) or not isinstance(w, int):
        raise ctx.unsupported("diagonal of dynamic axes")
    rest = [a for a in range(x.rank) if a not in (d1, d2)]
    moved = transpose(b, x, rest + [d1, d2])
    dims = [x.type.shape[a] for a in rest]
    length = max(0, min(h, w - offset) if offset >= 0 else min(h + offset, w))
    if length == 0:
        raise ctx.unsupported("an empty diagonal")
    start = offset if offset >= 0 else -offset * w
    flat = reshape(b, moved, dims + [h * w])
    # rows of w+1 elements each begin with a diagonal element; no strided slice (tract
    # fails to move a strided slice across the reshape)
    stop = start + length * (w + 1)
    seg = b.op("slice", flat, b.ints([start]), b.ints([min(stop, h * w)]), axes=(len(dims),), steps=(1,))
    if stop > h * w:
        pads = [(0, 0)] * len(dims) + [(0, stop - h * w)]
        seg = b.op("pad", seg, pads=tuple(pads), mode="constant", value=0.0 if x.type.dtype.is_float else 0)
    grid = reshape(b, seg, dims + [length, w + 1])
    first = b.op("slice", grid, b.ints([0]), b.ints([1]), axes=(len(dims) + 1,), steps=(1,))
    return b.op("squeeze", first, axes=(len(dims) + 1,))


@RULES.rule("aten::diag")
def diag(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    k = ctx.int(1) if ctx.n_inputs > 1 else 0
    if x.rank == 2:
        return take_diagonal(ctx, x, k, 0, 1)
    if x.rank != 1 or not isinstance(x.type.shape[0], int):
        raise ctx.unsupported("diag of a dynamic or non 1-D/2-D tensor")
    b = ctx.b
    n = x.type.shape[0] + abs(k)
    pad = [(0, abs(k))]
    v = b.op("pad", x, pads=tuple(pad), mode="constant", value=0.0 if x.type.dtype.is_float else 0)
    rows = unsqueeze(b, positions(b, i64(b, n)), [1])
    cols = unsqueeze(b, positions(b, i64(b, n)), [0])
    on = b.op("eq", b.op("sub", cols, rows), i64(b, k))
    spread = unsqueeze(b, v, [1]) if k >= 0 else unsqueeze(b, v, [0])
    zero = ctx.as_value(0, x.type.dtype)
    return b.op("select", on, spread, zero)


@RULES.rule("aten::diag_embed")
def diag_embed(ctx: LoweringContext) -> Value:
    """The last axis spread on a diagonal of two new axes: a ``range`` comparison mask
    (``col - row == offset``), then the two axes moved to ``dim1``/``dim2``."""
    x = ctx.tensor(0)
    b = ctx.b
    k = ctx.int(1) if ctx.n_inputs > 1 else 0
    rank = x.rank + 1
    d1 = ctx.axis(2, rank) if ctx.n_inputs > 2 else rank - 2
    d2 = ctx.axis(3, rank) if ctx.n_inputs > 3 else rank - 1
    if d1 == d2:
        raise ctx.unsupported("diag_embed with dim1 == dim2")
    if x.rank == 0:
        x = reshape(b, x, [1])
    zero = ctx.as_value(False if x.type.dtype is DType.BOOL else 0, x.type.dtype)
    if k:  # |k| zeros after the last element (concat: any dtype, any engine)
        tail = b.op("expand", zero, b.ints(list(x.type.shape)[:-1] + [abs(k)]))
        x = b.op("concat", x, tail, axis=x.rank - 1)
    m = dim_value(b, x, x.rank - 1)
    rows = unsqueeze(b, positions(b, m), [1])
    cols = unsqueeze(b, positions(b, m), [0])
    on = b.op("eq", b.op("sub", cols, rows), i64(b, k))
    # element (i, i + k) holds x[i] for k >= 0, element (j - k, j) holds x[j] for k < 0
    spread = unsqueeze(b, x, [x.rank]) if k >= 0 else unsqueeze(b, x, [x.rank - 1])
    out = b.op("select", on, spread, zero)
    if (d1, d2) == (rank - 2, rank - 1):
        return out
    perm, batch = [], 0
    for p in range(rank):
        if p == d1:
            perm.append(rank - 2)
        elif p == d2:
            perm.append(rank - 1)
        else:
            perm.append(batch)
            batch += 1
    return transpose(b, out, perm)


def _data_dependent(ctx: LoweringContext, what: str) -> UnsupportedHere:
    return ctx.unsupported(f"{what} has a number of elements that depends on the data "
                           "(a static-shape graph cannot hold it); use torch.where(mask, x, fill)")


def _known_mask(x: Value) -> np.ndarray | None:
    """``x``'s value when it is known at export time (inferred, or computed from constants)."""
    known = x.known if x.known is not None else fold(x)
    return None if known is None or known.dtype == object else np.asarray(known)


@RULES.rule("aten::nonzero", "aten::argwhere")
def nonzero(ctx: LoweringContext) -> Value:
    """A constant when the input is known at export time; otherwise the coordinates of
    the non-zero elements computed while running (:func:`true_positions`), stacked as
    PyTorch gives them: ``[count, rank]``."""
    x = ctx.tensor(0)
    known = _known_mask(x)
    if known is not None:
        return ctx.b.const(np.argwhere(known).astype(np.int64), DType.I64)
    coords = [unsqueeze(ctx.b, c, [1]) for c in _coordinates(ctx, x)]
    return coords[0] if len(coords) == 1 else ctx.b.op("concat", *coords, axis=1)


@RULES.rule("aten::nonzero_numpy")
def nonzero_numpy(ctx: LoweringContext) -> list[Value]:
    """``nonzero(as_tuple=True)``: one index vector per axis, constants when the input is
    known at export time (a mask the model builds from constants and sizes)."""
    x = ctx.tensor(0)
    known = _known_mask(x)
    if known is None:
        return _coordinates(ctx, x)
    return [ctx.b.const(ix.astype(np.int64), DType.I64) for ix in np.nonzero(known.reshape(known.shape or (1,)))]


def true_positions(ctx: LoweringContext, mask: Value) -> Value:
    """The row-major positions of ``mask``'s non-zero elements, in order, for a mask
    known only at run time: position ``i`` repeated ``mask[i] != 0`` times (the indices
    :func:`~t2n.frontend.lowering.rearrange.repeat_indices` builds for computed repeats),
    so that their count is a length tract computes while running."""
    flat = reshape(ctx.b, mask, [-1])
    if flat.type.dtype is not DType.BOOL:  # (tract compares numbers only)
        flat = ctx.b.op("ne", flat, ctx.b.const(np.zeros((), flat.type.dtype.numpy), flat.type.dtype))
    return repeat_indices(ctx, ctx.b.cast(flat, DType.I64))


def _coordinates(ctx: LoweringContext, x: Value) -> list[Value]:
    """Per axis of ``x``, the coordinate of each non-zero element: its row-major position
    divided by the product of the later axes' sizes, modulo its own axis' size (sizes read
    from the graph, so that they follow dynamic axes)."""
    b = ctx.b
    if x.rank == 0:
        raise _data_dependent(ctx, "nonzero of a 0-d tensor")
    positions = true_positions(ctx, x)
    out: list[Value] = []
    stride: Value | None = None
    for axis in reversed(range(x.rank)):  # non-negative integers: div truncates exactly
        c = positions if stride is None else b.op("div", positions, stride)
        if axis:
            n = dim_value(b, x, axis)
            c = b.op("sub", c, b.op("mul", b.op("div", c, n), n))
            stride = n if stride is None else b.op("mul", stride, n)
        out.append(c)
    return out[::-1]


def _static_mask(ctx: LoweringContext, mask: Value, x: Value) -> np.ndarray | None:
    """The mask broadcast to ``x``'s (static) shape when both are known at export."""
    if mask.known is None or mask.known.dtype == object or not x.type.shape.is_static:
        return None
    return np.broadcast_to(np.asarray(mask.known).astype(bool), tuple(int(d) for d in x.type.shape))


@RULES.rule("aten::masked_select")
def masked_select(ctx: LoweringContext) -> Value:
    """A gather at constant positions when the mask is known at export time; at the
    positions of its True elements computed while running otherwise (the result's length
    is the mask's count of True)."""
    x, mask = ctx.tensor(0), ctx.tensor(1)
    known = _static_mask(ctx, mask, x)
    if known is not None and list(np.broadcast_shapes(known.shape, tuple(x.type.shape))) == list(x.type.shape):
        flat = reshape(ctx.b, x, [int(known.size)])
        return ctx.b.op("gather", flat, ctx.b.const(np.flatnonzero(known).astype(np.int64), DType.I64), axis=0)
    b = ctx.b
    if list(x.type.shape) != list(mask.type.shape):  # both broadcast by ops, so sizes stay symbolic
        mask = b.cast(mask, DType.BOOL) if mask.type.dtype is not DType.BOOL else mask
        x, mask = b.op("select", mask, x, x), b.op("add", b.cast(mask, DType.I64),
                                                   b.op("mul", b.cast(x, DType.I64), i64(b, 0)))
    return b.op("gather", reshape(b, x, [-1]), true_positions(ctx, mask), axis=0)


@RULES.rule("aten::masked_scatter", "aten::masked_scatter_")
def masked_scatter(ctx: LoweringContext) -> Value:
    """``x`` where the mask is False; the mask's True positions, in row-major order, take
    consecutive elements of ``source``: a where over a gather of ``source`` at the running
    count of True (known at export for a constant mask, an integer prefix sum otherwise)."""
    x, mask = ctx.tensor(0), ctx.tensor(1)
    source = ctx.tensor(2, x.type.dtype)
    b = ctx.b
    if not x.type.shape.is_static or not source.type.shape.is_static:
        raise ctx.unsupported("masked_scatter on dynamic shapes")
    shape = [int(d) for d in x.type.shape]
    n = int(np.prod(shape, dtype=np.int64))
    src = reshape(b, source, [int(source.type.shape.numel)])
    known = _static_mask(ctx, mask, x)
    if mask.type.dtype is not DType.BOOL:
        mask = b.cast(mask, DType.BOOL)
    if list(mask.type.shape) != shape:
        mask = b.op("expand", mask, b.ints(shape))
    if known is not None:
        order = np.maximum(np.cumsum(known.reshape(-1)) - 1, 0).astype(np.int64)
        idx = b.const(order, DType.I64)
    else:
        from t2n.frontend.lowering.sort import prefix_scan

        counts = prefix_scan(ctx, b.cast(reshape(b, mask, [n]), DType.I64), 0, "add")
        idx = b.op("max", b.op("sub", counts, i64(b, 1)), i64(b, 0))
    taken = reshape(b, b.op("gather", src, idx, axis=0), shape)
    return b.op("select", mask, taken, x)
