"""Rearranging aten ops: repetition (repeat, tile, repeat_interleave), reordering
(flip, roll, rot90), channel shuffles and differences. Sizes come from the graph."""

from __future__ import annotations

import numpy as np

from t2n.frontend.context import LoweringContext, norm_axis
from t2n.frontend.helpers import dim_value, i64, transpose
from t2n.frontend.helpers import unsqueeze as unsqueeze_axes
from t2n.frontend.lowering.creation import data_range
from t2n.frontend.lowering.folding import fold
from t2n.frontend.lowering.shape import (
    concat_shape,
    dims_of,
    shape_part,
    slice_axis,
)
from t2n.frontend.lowering.sort import count_below, running_sum
from t2n.frontend.lowering.split import join
from t2n.frontend.registry import RuleSet
from t2n.ir import Builder, DType, Value
from t2n.ir.dims import has_sym

RULES = RuleSet("rearrange")


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
    """Repeats given as an int follow dynamic axes; a constant repeats tensor becomes a
    gather with fixed indices; repeats computed in the model (durations from a predictor)
    become a gather with indices built at run time (:func:`repeat_indices`), whose length
    tract computes from the data."""
    if not ctx.has("self"):
        known = _known_ints(ctx.raw(0))
        if known is None:
            return repeat_indices(ctx, _repeats_vector(ctx, ctx.tensor(0), None), _output_size(ctx))
        return ctx.b.const(np.repeat(np.arange(len(known), dtype=np.int64), known), DType.I64)
    x = ctx.tensor(0)
    if ctx.is_none("dim"):
        x = ctx.b.op("reshape", x, ctx.b.ints([-1]))
        axis = 0
    else:
        axis = ctx.axis("dim", x.rank)
    raw = ctx.raw(1)
    known = _known_ints(raw)
    if known is None:
        assert isinstance(raw, Value)
        reps = _repeats_vector(ctx, raw, (x, axis))
        return ctx.b.op("gather", x, repeat_indices(ctx, reps, _output_size(ctx)), axis=axis)
    if isinstance(raw, Value) and raw.type.shape.numel != 1:
        n = x.type.shape[axis]
        if not isinstance(n, int) or len(known) != n:
            raise ctx.unsupported(f"repeat_interleave: {len(known)} repeats for an axis of size {n}")
        idx = np.repeat(np.arange(n, dtype=np.int64), known)
        if idx.size == 0:
            raise ctx.unsupported("repeat_interleave with all-zero repeats gives an empty tensor")
        return ctx.b.op("gather", x, ctx.b.const(idx, DType.I64), axis=axis)
    times = int(known[0])
    if times < 1:
        raise ctx.unsupported("repeat_interleave with zero repeats gives an empty tensor")
    return x if times == 1 else repeat_each(ctx.b, x, axis, times)


def _known_ints(raw: object) -> np.ndarray | None:
    """The repeats as a 1-D int64 array when they are known at export time (numbers, or
    a tensor computed from constants only), else None."""
    if not isinstance(raw, Value):
        return np.asarray(raw, dtype=np.int64).reshape(-1)
    known = raw.known if raw.known is not None else fold(raw)
    if known is None or (known.dtype == object and has_sym(known)):
        return None
    return np.asarray(known, dtype=np.int64).reshape(-1)


def _repeats_vector(ctx: LoweringContext, reps: Value, along: tuple[Value, int] | None) -> Value:
    """Repeats computed in the model as a 1-D i64 vector: one per element of ``along``
    (tensor, axis), a single count broadcast to that axis' length."""
    b = ctx.b
    if reps.type.dtype.is_float or reps.type.dtype is DType.BOOL:
        raise ctx.unsupported(f"repeat_interleave: repeats must be integers, got {reps.type.dtype}")
    reps = b.cast(reps, DType.I64)
    if reps.rank > 1:
        raise ctx.unsupported(f"repeat_interleave: repeats must be 0-d or 1-D, got rank {reps.rank}")
    if along is None:
        return reps if reps.rank == 1 else b.op("reshape", reps, b.ints([1]))
    x, axis = along
    if reps.rank == 0 or reps.type.shape[0] == 1:
        one = b.op("reshape", reps, b.ints([]))
        return b.op("expand", one, b.op("reshape", dim_value(b, x, axis), b.ints([1])))
    n, m = x.type.shape[axis], reps.type.shape[0]
    if isinstance(n, int) and isinstance(m, int) and n != m:
        raise ctx.unsupported(f"repeat_interleave: {m} repeats for an axis of size {n}")
    return reps


def _output_size(ctx: LoweringContext) -> int | None:
    """``output_size=`` when the call gives it as a number (the output then has that static length)."""
    if not ctx.has("output_size") or ctx.is_none("output_size"):
        return None
    size = ctx.raw("output_size")
    return int(size) if isinstance(size, int) else None


def repeat_indices(ctx: LoweringContext, reps: Value, output_size: int | None = None) -> Value:
    """``i`` repeated ``reps[i]`` times, for repeats known only at run time: output
    position ``j`` takes the source index counting the running totals of ``reps`` that are
    <= ``j`` (a comparison of every position with every total, summed). The positions are
    a range to ``sum(reps)`` computed from the data (``output_size`` when given), so the
    output's length is whatever the repeats add up to."""
    b = ctx.b
    totals = running_sum(ctx, reps, 0)
    zero, one = i64(b, 0), i64(b, 1)
    if output_size is not None:
        positions = b.const(np.arange(output_size, dtype=np.int64), DType.I64)
    else:
        positions = data_range(b, zero, b.op("sum_reduce", reps, axes=(0,), keepdims=False), one)
    return count_below(ctx, totals, positions, right=True)


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


# -- sliding windows and rotations -------------------------------------------------

@RULES.rule("aten::unfold")
def unfold(ctx: LoweringContext) -> Value:
    """``x.unfold(dim, size, step)``: windows gathered with constant indices; the window
    axis goes last, as in PyTorch."""
    x = ctx.tensor(0)
    b = ctx.b
    if x.rank == 0:
        return b.op("reshape", x, b.ints([1]))
    axis, size, step = ctx.axis(1, x.rank), ctx.int(2), ctx.int(3)
    n = x.type.shape[axis]
    if not isinstance(n, int):
        raise ctx.unsupported("sliding windows over a dynamic axis")
    count = (n - size) // step + 1
    idx = np.arange(count)[:, None] * step + np.arange(size)[None, :]
    g = b.op("gather", x, b.const(idx.astype(np.int64), DType.I64), axis=axis)
    perm = list(range(axis + 1)) + list(range(axis + 2, x.rank + 1)) + [axis + 1]
    return transpose(b, g, perm)


@RULES.rule("aten::rot90")
def rot90(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    k = ctx.int(1) % 4 if ctx.n_inputs > 1 else 1
    dims = ctx.ints(2) if ctx.n_inputs > 2 else [0, 1]
    d0, d1 = (d % x.rank for d in dims)
    b = ctx.b
    perm = list(range(x.rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    if k == 1:
        return transpose(b, b.op("reverse", x, axes=(d1,)), perm)
    if k == 2:
        return b.op("reverse", x, axes=tuple(sorted((d0, d1))))
    if k == 3:
        return b.op("reverse", transpose(b, x, perm), axes=(d1,))
    return x
