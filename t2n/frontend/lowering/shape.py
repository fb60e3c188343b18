"""Shape and movement aten ops. Sizes are taken from the graph (``shape_of``), never
from the traced example, so that they stay right under dynamic axes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from t2n.frontend.context import LoweringContext, norm_axis
from t2n.frontend.helpers import dim_value, i64
from t2n.frontend.helpers import unsqueeze as unsqueeze_axes
from t2n.frontend.registry import RuleSet
from t2n.ir import Builder, Dim, DType, Value
from t2n.ir.graph_info import BakedConstant
from t2n.ir.infer_utils import INT64_MAX

RULES = RuleSet("shape")


def shape_part(b: Builder, x: Value, start: int, end: int) -> Value | None:
    """``x.shape[start:end]`` as a 1-D i64 value (None when empty)."""
    if end <= start:
        return None
    if start == 0 and end == x.rank:
        return b.op("shape_of", x)
    return b.op("slice", b.op("shape_of", x), b.ints([start]), b.ints([end]), axes=(0,), steps=(1,))


def concat_shape(b: Builder, parts: list[Value | list[int] | None]) -> Value:
    vals = [b.ints(p) if isinstance(p, list) else p for p in parts if p is not None and p != []]
    vals = [v for v in vals if isinstance(v, Value)]
    return vals[0] if len(vals) == 1 else b.op("concat", *vals, axis=0)


def dims_of(b: Builder, x: Value, axes: Sequence[int]) -> Value:
    """``x.shape[axes]`` as a 1-D i64 value (symbolic under dynamic axes)."""
    return b.op("gather", b.op("shape_of", x), b.ints(list(axes)), axis=0)


def as_bound(b: Builder, v: int | Value) -> Value:
    """A slice bound (a Python int or a 0-d/1-d integer value) as a 1-element i64 tensor."""
    if not isinstance(v, Value):
        return b.ints([int(v)])
    v = b.cast(v, DType.I64)
    return v if v.rank == 1 else b.op("reshape", v, b.ints([1]))


def slice_axis(b: Builder, x: Value, axis: int, begin: int | Value, end: int | Value | None,
               step: int = 1) -> Value:
    """``x[begin:end:step]`` along ``axis``, python-style bounds; ``end=None`` runs to the end."""
    return b.op("slice", x, as_bound(b, begin), as_bound(b, INT64_MAX if end is None else end),
                axes=(axis,), steps=(step,))


@RULES.rule("aten::view", "aten::reshape", "aten::_reshape_alias", "aten::_unsafe_view")
def view(ctx: LoweringContext) -> Value:
    """A target computed in ways shape inference cannot follow (float arithmetic on
    sizes, e.g. ``int(math.ceil(h / p))``) falls back to the traced shape; under
    dynamic axes the baked-size check then reports it."""
    target = ctx.shape_tensor(1)
    traced = ctx.traced_shape(0)
    if target.known is None and traced is not None:
        target = ctx.b.ints(traced)
    return ctx.b.op("reshape", ctx.tensor(0), target)


@RULES.rule("aten::view_as", "aten::reshape_as")
def view_as(ctx: LoweringContext) -> Value:
    return ctx.b.op("reshape", ctx.tensor(0), ctx.b.op("shape_of", ctx.tensor(1)))


@RULES.rule("aten::flatten")
def flatten(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    if x.rank == 0:
        return ctx.b.op("reshape", x, ctx.b.ints([1]))
    s = ctx.axis("start_dim", x.rank) if ctx.has("start_dim") else 0
    e = ctx.axis("end_dim", x.rank) if ctx.has("end_dim") else x.rank - 1
    if s == e:
        return x
    target = concat_shape(ctx.b, [shape_part(ctx.b, x, 0, s), [-1], shape_part(ctx.b, x, e + 1, x.rank)])
    return ctx.b.op("reshape", x, target)


@RULES.rule("aten::permute")
def permute(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    perm = [norm_axis(d, x.rank) for d in ctx.ints(1)]
    return ctx.b.op("transpose", x, perm=tuple(perm))


@RULES.rule("aten::transpose", "aten::transpose_", "aten::swapaxes", "aten::swapdims")
def transpose(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    if x.rank < 2:
        return x
    a: int = ctx.axis(1, x.rank)
    c: int = ctx.axis(2, x.rank)
    if a == c:
        return x
    perm = list(range(x.rank))
    perm[a], perm[c] = perm[c], perm[a]
    return ctx.b.op("transpose", x, perm=tuple(perm))


@RULES.rule("aten::t", "aten::t_", "aten::numpy_T")
def t(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    if x.rank < 2:
        return x
    return ctx.b.op("transpose", x, perm=tuple(reversed(range(x.rank))))


@RULES.rule("aten::unsqueeze", "aten::unsqueeze_")
def unsqueeze(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    return ctx.b.op("unsqueeze", x, axes=(norm_axis(ctx.int(1), x.rank + 1),))


@RULES.rule("aten::squeeze", "aten::squeeze_")
def squeeze(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    if ctx.n_inputs > 1 and not ctx.is_none(1):
        axes = [norm_axis(d, x.rank) for d in ctx.ints(1)]
    else:
        axes = list(range(x.rank))
    axes = sorted({a for a in axes if x.type.shape[a] == 1})
    return ctx.b.op("squeeze", x, axes=tuple(axes)) if axes else x


@RULES.rule("aten::cat", "aten::concat", "aten::concatenate")
def cat(ctx: LoweringContext) -> Value:
    items = ctx.raw(0)
    if not isinstance(items, (list, tuple)):
        raise ctx.unsupported("concatenating a tensor list computed at run time")
    values = [ctx.as_value(v) for v in items]
    values = [v for v in values if not (v.rank == 1 and v.type.shape[0] == 0)] or values[:1]
    rank = values[0].rank
    axis = ctx.axis(1, rank) if ctx.n_inputs > 1 else 0
    # empty pieces (``q[..., d:]`` when nothing is left) contribute nothing, and an
    # empty tensor has no NNEF form
    values = [v for v in values if not (v.rank == rank and v.type.shape[axis] == 0)] or values[:1]
    dt = ctx.promote(*values)
    values = [ctx.b.cast(v, dt) for v in values]
    if len(values) == 1:
        return values[0]
    return ctx.b.op("concat", *values, axis=axis)


def bound(ctx: LoweringContext, x: Any, default: int) -> Value:
    if x is None:
        return ctx.b.ints([default])
    return ctx.shape_tensor([x])


@RULES.rule("aten::slice")
def slice_(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    axis = ctx.axis(1, x.rank) if not ctx.is_none(1) else 0
    step = ctx.int(4) if ctx.n_inputs > 4 and not ctx.is_none(4) else 1
    start = ctx.optional(2) if ctx.n_inputs > 2 else None
    end = ctx.optional(3) if ctx.n_inputs > 3 else None
    if isinstance(end, int) and end >= INT64_MAX // 2:
        end = None
    if start in (None, 0) and end is None and step == 1:
        return x
    return ctx.b.op("slice", x, bound(ctx, start, 0), bound(ctx, end, INT64_MAX),
                    axes=(axis,), steps=(step,))


@RULES.rule("aten::select")
def select(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    axis = ctx.axis(1, x.rank)
    idx = ctx.raw(2)
    if isinstance(idx, int):
        begin = ctx.b.ints([idx])
        end = ctx.b.ints([idx + 1 if idx != -1 else INT64_MAX])
    else:
        i = ctx.as_value(idx, DType.I64)
        begin = ctx.shape_tensor([i])
        end = ctx.shape_tensor([ctx.b.op("add", i, ctx.as_value(1, DType.I64))])
    s = ctx.b.op("slice", x, begin, end, axes=(axis,), steps=(1,))
    return ctx.b.op("squeeze", s, axes=(axis,))


@RULES.rule("aten::expand", "aten::broadcast_to")
def expand(ctx: LoweringContext) -> Value:
    return ctx.b.op("expand", ctx.tensor(0), ctx.shape_tensor(1))


@RULES.rule("aten::expand_as")
def expand_as(ctx: LoweringContext) -> Value:
    return ctx.b.op("expand", ctx.tensor(0), ctx.b.op("shape_of", ctx.tensor(1)))


@RULES.rule("aten::mT", "aten::mH", "aten::adjoint")
def matrix_transpose(ctx: LoweringContext) -> Value:
    """Swap the last two axes (the conjugate is a no-op on real tensors)."""
    x = ctx.tensor(0)
    if x.rank < 2:
        raise ctx.unsupported("matrix transpose of a tensor of rank < 2")
    perm = list(range(x.rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return ctx.b.op("transpose", x, perm=tuple(perm))


@RULES.rule("aten::movedim", "aten::moveaxis")
def movedim(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    src = [norm_axis(a, x.rank) for a in ctx.ints(1)]
    dst = [norm_axis(a, x.rank) for a in ctx.ints(2)]
    if len(src) != len(dst) or len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ctx.unsupported("movedim: source and destination must be distinct axes of equal count")
    perm: list[int | None] = [None] * x.rank
    for a, d in zip(src, dst):
        perm[d] = a
    rest = iter(a for a in range(x.rank) if a not in src)
    full = [p if p is not None else next(rest) for p in perm]
    if full == list(range(x.rank)):
        return x
    return ctx.b.op("transpose", x, perm=tuple(full))


@RULES.rule("aten::unflatten")
def unflatten(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    d = ctx.axis(1, x.rank)
    target = concat_shape(ctx.b, [shape_part(ctx.b, x, 0, d), ctx.shape_tensor(2),
                                  shape_part(ctx.b, x, d + 1, x.rank)])
    return ctx.b.op("reshape", x, target)


# -- repetition ----------------------------------------------------------------------

def tile(b: Builder, x: Value, reps: Value, n_reps: int) -> Value:
    """torch ``repeat`` semantics: ``reps`` (1-D i64, ``n_reps`` long) may exceed the rank."""
    if n_reps < x.rank:
        raise ValueError("fewer repeats than dimensions")
    x = unsqueeze_axes(b, x, list(range(n_reps - x.rank)))
    return b.op("tile", x, reps)


@RULES.rule("aten::repeat")
def repeat(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    reps = ctx.shape_tensor(1)
    n = reps.type.shape[0]
    assert isinstance(n, int)
    if n < x.rank:
        raise ctx.unsupported("repeat: fewer repeats than tensor dimensions")
    return tile(ctx.b, x, reps, n)


@RULES.rule("aten::tile")
def tile_rule(ctx: LoweringContext) -> Value:
    """torch.tile pads the repeats with leading ones up to the rank."""
    x = ctx.tensor(0)
    reps = ctx.shape_tensor(1)
    n = reps.type.shape[0]
    assert isinstance(n, int)
    if n < x.rank:
        reps = ctx.b.op("concat", ctx.b.ints([1] * (x.rank - n)), reps, axis=0)
        n = x.rank
    return tile(ctx.b, x, reps, n)


def repeat_each(b: Builder, x: Value, axis: int, times: int) -> Value:
    """Every element ``times`` times in a row along ``axis``: unsqueeze, expand, merge."""
    y = b.op("unsqueeze", x, axes=(axis + 1,))
    grown = concat_shape(b, [shape_part(b, x, 0, axis + 1), [times], shape_part(b, x, axis + 1, x.rank)])
    y = b.op("expand", y, grown)
    merged = concat_shape(b, [shape_part(b, x, 0, axis), [-1], shape_part(b, x, axis + 1, x.rank)])
    return b.op("reshape", y, merged)


@RULES.rule("aten::repeat_interleave")
def repeat_interleave(ctx: LoweringContext) -> Value:
    """Repeats given as an int follow dynamic axes; a repeats tensor must be constant
    (its values decide the output size), and becomes a gather with fixed indices."""
    if not ctx.has("self"):
        reps = np.asarray(ctx.const(0), dtype=np.int64).reshape(-1)
        return ctx.b.const(np.repeat(np.arange(len(reps), dtype=np.int64), reps), DType.I64)
    x = ctx.tensor(0)
    if ctx.is_none("dim"):
        x = ctx.b.op("reshape", x, ctx.b.ints([-1]))
        axis = 0
    else:
        axis = ctx.axis("dim", x.rank)
    raw = ctx.raw(1)
    if isinstance(raw, Value) and raw.type.shape.numel != 1:
        reps = np.asarray(ctx.const(1), dtype=np.int64).reshape(-1)
        n = x.type.shape[axis]
        if not isinstance(n, int) or len(reps) != n:
            raise ctx.unsupported(f"repeat_interleave: {len(reps)} repeats for an axis of size {n}")
        idx = np.repeat(np.arange(n, dtype=np.int64), reps)
        if idx.size == 0:
            raise ctx.unsupported("repeat_interleave with all-zero repeats gives an empty tensor")
        return ctx.b.op("gather", x, ctx.b.const(idx, DType.I64), axis=axis)
    times = int(np.asarray(ctx.const(1)).reshape(-1)[0])
    if times < 1:
        raise ctx.unsupported("repeat_interleave with zero repeats gives an empty tensor")
    return x if times == 1 else repeat_each(ctx.b, x, axis, times)


# -- reordering ----------------------------------------------------------------------

@RULES.rule("aten::flip", "aten::fliplr", "aten::flipud")
def flip(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    if ctx.kind == "aten::flip":
        axes = sorted({norm_axis(a, x.rank) for a in ctx.ints(1)})
    else:
        need = 2 if ctx.kind == "aten::fliplr" else 1
        if x.rank < need:
            raise ctx.unsupported(f"{ctx.kind} needs a tensor of rank >= {need}")
        axes = [1 if ctx.kind == "aten::fliplr" else 0]
    return ctx.b.op("reverse", x, axes=tuple(axes)) if axes else x


def roll_axis(b: Builder, x: Value, axis: int, shift: int) -> Value:
    """Elements move ``shift`` places forward, wrapping: ``cat(x[-s:], x[:-s])`` (the
    same for a negative shift). Only a shift of the size or more is reduced with the
    traced size; smaller ones follow a dynamic axis."""
    n = x.type.shape[axis]
    if isinstance(n, int) and n and not -n < shift < n:
        shift %= n
    if shift == 0:
        return x
    return b.op("concat", slice_axis(b, x, axis, -shift, None), slice_axis(b, x, axis, 0, -shift),
                axis=axis)


@RULES.rule("aten::roll")
def roll(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    shifts = ctx.ints(1)
    dims = ctx.ints(2) if ctx.n_inputs > 2 and not ctx.is_none(2) else []
    if not dims:
        if len(shifts) != 1:
            raise ctx.unsupported("roll without dims takes a single shift")
        flat = ctx.b.op("reshape", x, ctx.b.ints([-1]))
        return ctx.b.op("reshape", roll_axis(ctx.b, flat, 0, shifts[0]), ctx.b.op("shape_of", x))
    if len(shifts) != len(dims):
        raise ctx.unsupported("roll: shifts and dims differ in length")
    for s, d in zip(shifts, dims):
        x = roll_axis(ctx.b, x, norm_axis(d, x.rank), s)
    return x


@RULES.rule("aten::narrow", "aten::narrow_copy")
def narrow(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    axis = ctx.axis(1, x.rank)
    start = ctx.raw(2)
    length = ctx.raw(3)
    if isinstance(start, int) and isinstance(length, int):
        end = start + length
        # A negative start counts from the end, python-style, as the slice bounds do.
        return slice_axis(ctx.b, x, axis, start, None if start < 0 and end == 0 else end)
    b = ctx.b
    begin = b.cast(ctx.as_value(start), DType.I64)
    stop = b.op("add", begin, b.cast(ctx.as_value(length), DType.I64))
    return slice_axis(b, x, axis, begin, stop)


def _static(d: Dim, ctx: LoweringContext, what: str) -> int:
    if not isinstance(d, int):
        raise ctx.unsupported(f"{what} needs a static size, not {d}")
    return d


def piece_count_size(ctx: LoweringContext, x: Value, axis: int, what: str) -> int:
    """The traced size of the axis a tensor is split along. The number of pieces (a
    Python list) is fixed by it: under dynamic axes the pass reports it as baked."""
    n = _static(x.type.shape[axis], ctx, what)
    ctx.lowering.graph.info.baked_constants.append(BakedConstant(
        dim_value(ctx.b, x, axis), ctx.loc, f"the axis size that fixes how many pieces {what} returns"))
    return n


# -- splitting -----------------------------------------------------------------------

def pieces(b: Builder, x: Value, axis: int, bounds: Sequence[tuple[int | Value, int | Value | None]]) -> list[Value]:
    return [slice_axis(b, x, axis, lo, hi) for lo, hi in bounds]


def cut(b: Builder, x: Value, axis: int, starts: Sequence[int]) -> list[Value]:
    """Pieces starting at ``starts``; the last one runs to the end (so it follows the size)."""
    ends: list[int | None] = [*starts[1:], None]
    return pieces(b, x, axis, list(zip(starts, ends)))


@RULES.rule("aten::unbind")
def unbind(ctx: LoweringContext) -> list[Value]:
    x = ctx.tensor(0)
    axis = ctx.axis(1, x.rank) if ctx.n_inputs > 1 else 0
    n = piece_count_size(ctx, x, axis, "unbind")
    return [ctx.b.op("squeeze", slice_axis(ctx.b, x, axis, i, i + 1), axes=(axis,)) for i in range(n)]


@RULES.rule("aten::split", "aten::unsafe_split", "aten::split_with_sizes",
            "aten::unsafe_split_with_sizes")
def split(ctx: LoweringContext) -> list[Value]:
    x = ctx.tensor(0)
    axis = ctx.axis(2, x.rank) if ctx.n_inputs > 2 else 0
    n = piece_count_size(ctx, x, axis, "split")
    size = ctx.const(1)
    if isinstance(size, (list, tuple)):
        sizes = [int(s) for s in size]
        if sum(sizes) != n:
            raise ctx.unsupported(f"split sizes {sizes} do not add up to {n}")
        starts = [int(v) for v in np.cumsum([0, *sizes[:-1]])]
        ends: list[int | None] = [*starts[1:], None]
        return pieces(ctx.b, x, axis, list(zip(starts, ends)))
    step = int(size)
    if n == 0 or step <= 0:
        raise ctx.unsupported("split of an empty axis or by a non-positive size")
    return cut(ctx.b, x, axis, list(range(0, n, step)))


@RULES.rule("aten::chunk", "aten::unsafe_chunk")
def chunk(ctx: LoweringContext) -> list[Value]:
    """Chunk size ceil(n / chunks) is computed from the graph's size, so the bounds
    follow a dynamic axis; how many chunks there are is fixed by the traced size."""
    x = ctx.tensor(0)
    chunks = ctx.int(1)
    axis = ctx.axis(2, x.rank) if ctx.n_inputs > 2 else 0
    # With two chunks the count is 2 whatever the size; with more it depends on it.
    n = piece_count_size(ctx, x, axis, "chunk") if chunks > 2 else _static(x.type.shape[axis], ctx, "chunk")
    if chunks <= 0 or n == 0:
        raise ctx.unsupported("chunk of an empty axis or into a non-positive count")
    step = -(-n // chunks)
    count = -(-n // step)
    b = ctx.b
    size = b.op("div", b.op("add", dim_value(b, x, axis), i64(b, chunks - 1)), i64(b, chunks))
    starts: list[int | Value] = [0] + [b.op("mul", size, i64(b, i)) for i in range(1, count)]
    ends: list[int | Value | None] = [*starts[1:], None]
    return pieces(b, x, axis, list(zip(starts, ends)))


@RULES.rule("aten::tensor_split")
def tensor_split(ctx: LoweringContext) -> list[Value]:
    """Sections or split indices must be constants; the last piece runs to the end."""
    x = ctx.tensor(0)
    axis = ctx.axis(2, x.rank) if ctx.n_inputs > 2 else 0
    n = piece_count_size(ctx, x, axis, "tensor_split")
    spec = ctx.const(1)
    raw = ctx.raw(1)
    if isinstance(raw, Value) and raw.rank == 0:
        spec = int(spec)
    if isinstance(spec, (list, tuple)):
        return cut(ctx.b, x, axis, [0, *[int(i) for i in spec]])
    k = int(spec)
    if k <= 0:
        raise ctx.unsupported("tensor_split into a non-positive number of sections")
    q, r = divmod(n, k)
    return cut(ctx.b, x, axis, [i * q + min(i, r) for i in range(k)])


# -- stacking ------------------------------------------------------------------------

def tensor_list(ctx: LoweringContext, key: int | str = 0) -> list[Value]:
    items = ctx.raw(key)
    if isinstance(items, Value):
        return [items]
    if not isinstance(items, (list, tuple)):
        raise ctx.unsupported("a tensor list computed at run time")
    return [ctx.as_value(v) for v in items]


def join(ctx: LoweringContext, values: list[Value], axis: int) -> Value:
    dt = ctx.promote(*values)
    values = [ctx.b.cast(v, dt) for v in values]
    return values[0] if len(values) == 1 else ctx.b.op("concat", *values, axis=axis)


@RULES.rule("aten::stack")
def stack(ctx: LoweringContext) -> Value:
    values = tensor_list(ctx)
    axis = norm_axis(ctx.int(1), values[0].rank + 1) if ctx.n_inputs > 1 else 0
    return join(ctx, [ctx.b.op("unsqueeze", v, axes=(axis,)) for v in values], axis)


def at_least(b: Builder, x: Value, rank: int) -> Value:
    """torch.atleast_{1,2,3}d: 0-d → [1]*rank, 1-d [n] → [1, n] / [1, n, 1], 2-d → [m, n, 1]."""
    if x.rank >= rank:
        return x
    if x.rank == 0:
        return b.op("unsqueeze", x, axes=tuple(range(rank)))
    if x.rank == 1:
        return b.op("unsqueeze", x, axes=(0,) if rank == 2 else (0, 2))
    return b.op("unsqueeze", x, axes=(2,))


def _at_least_rule(rank: int):  # type: ignore[no-untyped-def]
    def rule(ctx: LoweringContext) -> Value | list[Value]:
        raw = ctx.raw(0)
        if isinstance(raw, Value):
            return at_least(ctx.b, raw, rank)
        return [at_least(ctx.b, v, rank) for v in tensor_list(ctx)]

    return rule


for _r in (1, 2, 3):
    RULES.add(f"aten::atleast_{_r}d", _at_least_rule(_r))


@RULES.rule("aten::hstack", "aten::vstack", "aten::row_stack", "aten::dstack", "aten::column_stack")
def stack_family(ctx: LoweringContext) -> Value:
    values = tensor_list(ctx)
    b = ctx.b
    if ctx.kind == "aten::hstack":
        values = [at_least(b, v, 1) for v in values]
        return join(ctx, values, 0 if all(v.rank == 1 for v in values) else 1)
    if ctx.kind in ("aten::vstack", "aten::row_stack"):
        return join(ctx, [at_least(b, v, 2) for v in values], 0)
    if ctx.kind == "aten::dstack":
        return join(ctx, [at_least(b, v, 3) for v in values], 2)
    cols = [b.op("unsqueeze", v, axes=(v.rank,)) if v.rank < 2 else v for v in values]
    cols = [b.op("unsqueeze", v, axes=(0,)) if v.rank < 2 else v for v in cols]
    return join(ctx, cols, 1)


# -- channel rearrangement -----------------------------------------------------------

@RULES.rule("aten::pixel_shuffle")
def pixel_shuffle(ctx: LoweringContext) -> Value:
    """[*, C·r², H, W] → [*, C, r, r, H, W] → [*, C, H, r, W, r] → [*, C, H·r, W·r]."""
    x = ctx.tensor(0)
    r = ctx.int(1)
    b = ctx.b
    k = x.rank - 3
    lead = shape_part(b, x, 0, k)
    hw = dims_of(b, x, [k + 1, k + 2])
    y = b.op("reshape", x, concat_shape(b, [lead, [-1, r, r], hw]))
    base = list(range(k))
    y = b.op("transpose", y, perm=(*base, k, k + 3, k + 1, k + 4, k + 2))
    return b.op("reshape", y, concat_shape(b, [lead, [-1], b.op("mul", hw, i64(b, r))]))


@RULES.rule("aten::pixel_unshuffle")
def pixel_unshuffle(ctx: LoweringContext) -> Value:
    """[*, C, H·r, W·r] → [*, C, H, r, W, r] → [*, C, r, r, H, W] → [*, C·r², H, W]."""
    x = ctx.tensor(0)
    r = ctx.int(1)
    b = ctx.b
    k = x.rank - 3
    lead = shape_part(b, x, 0, k)
    hw = b.op("div", dims_of(b, x, [k + 1, k + 2]), i64(b, r))
    h, w = (b.op("slice", hw, b.ints([i]), b.ints([i + 1]), axes=(0,), steps=(1,)) for i in (0, 1))
    y = b.op("reshape", x, concat_shape(b, [lead, [-1], h, [r], w, [r]]))
    base = list(range(k))
    y = b.op("transpose", y, perm=(*base, k, k + 2, k + 4, k + 1, k + 3))
    return b.op("reshape", y, concat_shape(b, [lead, [-1], hw]))


@RULES.rule("aten::channel_shuffle", "aten::native_channel_shuffle")
def channel_shuffle(ctx: LoweringContext) -> Value:
    """[N, C, *] → [N, g, C/g, *] → swap the group axes → [N, C, *]."""
    x = ctx.tensor(0)
    g = ctx.int(1)
    b = ctx.b
    y = b.op("reshape", x, concat_shape(b, [shape_part(b, x, 0, 1), [g, -1], shape_part(b, x, 2, x.rank)]))
    perm = list(range(y.rank))
    perm[1], perm[2] = 2, 1
    y = b.op("transpose", y, perm=tuple(perm))
    return b.op("reshape", y, b.op("shape_of", x))


# -- differences ---------------------------------------------------------------------

@RULES.rule("aten::diff")
def diff(ctx: LoweringContext) -> Value:
    """n-th forward difference along ``dim`` (xor for bool), after prepend/append."""
    x = ctx.tensor(0)
    n = ctx.int("n") if ctx.has("n") else 1
    axis = ctx.axis("dim", x.rank) if ctx.has("dim") else x.rank - 1
    extra = {k: ctx.optional_tensor(k) if ctx.has(k) else None for k in ("prepend", "append")}
    b = ctx.b
    for k, v in extra.items():
        if v is not None and v.rank == 0:
            extra[k] = b.op("expand", v, _diff_shape(b, x, axis))
        elif v is not None and v.rank != x.rank:
            raise ctx.unsupported(f"diff: {k} must have the rank of the input")
    parts = [v for v in (extra["prepend"], x, extra["append"]) if v is not None]
    y = join(ctx, parts, axis)
    for _ in range(n):
        hi, lo = slice_axis(b, y, axis, 1, None), slice_axis(b, y, axis, 0, -1)
        y = b.op("xor", hi, lo) if y.type.dtype is DType.BOOL else b.op("sub", hi, lo)
    return y


def _diff_shape(b: Builder, x: Value, axis: int) -> Value:
    """A scalar prepend/append broadcasts to x's shape with size 1 along ``axis``."""
    return concat_shape(b, [shape_part(b, x, 0, axis), [1], shape_part(b, x, axis + 1, x.rank)])
