"""Splitting and stacking aten ops: unbind, split, chunk, tensor_split, stack and its
h/v/d/column variants. How many pieces a split returns is fixed by the traced size."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from t2n.frontend.context import LoweringContext, norm_axis
from t2n.frontend.helpers import dim_value, i64
from t2n.frontend.lowering.shape import (
    slice_axis,
)
from t2n.frontend.registry import RuleSet
from t2n.ir import Builder, Dim, Value
from t2n.ir.graph_info import BakedConstant

RULES = RuleSet("split")


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


def cut(b: Builder, x: Value, axis: int, starts: Sequence[int | Value]) -> list[Value]:
    """Pieces starting at ``starts`` (constants or computed sizes); the last one runs to
    the end (so it follows the size)."""
    ends: list[int | Value | None] = [*starts[1:], None]
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
    return cut(ctx.b, x, axis, split_starts(ctx, piece_count_size(ctx, x, axis, "split")))


def split_starts(ctx: LoweringContext, n: int) -> list[int]:
    """Where ``split``'s pieces of an axis of ``n`` start: its argument 1 is their sizes,
    or the size of each piece but the last."""
    size = ctx.const(1)
    if isinstance(size, (list, tuple)):
        sizes = [int(s) for s in size]
        if sum(sizes) != n:
            raise ctx.unsupported(f"split sizes {sizes} do not add up to {n}")
        return [int(v) for v in np.cumsum([0, *sizes[:-1]])]
    step = int(size)
    if n == 0 or step <= 0:
        raise ctx.unsupported("split of an empty axis or by a non-positive size")
    return list(range(0, n, step))


@RULES.rule("aten::chunk", "aten::unsafe_chunk")
def chunk(ctx: LoweringContext) -> list[Value]:
    """Chunk size ceil(n / chunks) is computed from the graph's size, so the bounds
    follow a dynamic axis; how many chunks there are is fixed by the traced size."""
    x = ctx.tensor(0)
    return chunk_pieces(ctx, x, ctx.int(1), ctx.axis(2, x.rank) if ctx.n_inputs > 2 else 0)


def chunk_pieces(ctx: LoweringContext, x: Value, chunks: int, axis: int) -> list[Value]:
    """``chunk``'s pieces of ``x`` (also the complex rule's, on the (re, im) pair)."""
    # With two chunks the count is 2 whatever the size; with more it depends on it.
    n = piece_count_size(ctx, x, axis, "chunk") if chunks > 2 else _static(x.type.shape[axis], ctx, "chunk")
    if chunks <= 0 or n == 0:
        raise ctx.unsupported("chunk of an empty axis or into a non-positive count")
    step = -(-n // chunks)
    count = -(-n // step)
    b = ctx.b
    size = b.op("div", b.op("add", dim_value(b, x, axis), i64(b, chunks - 1)), i64(b, chunks))
    return cut(b, x, axis, [0, *(b.op("mul", size, i64(b, i)) for i in range(1, count))])


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


def _at_least_rule(rank: int) -> Callable[[LoweringContext], Value | list[Value]]:
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


@RULES.rule("aten::hsplit", "aten::vsplit", "aten::dsplit")
def hvd_split(ctx: LoweringContext) -> list[Value]:
    """numpy-style splits: even sections (which must divide the axis) or indices."""

    x = ctx.tensor(0)
    kind = ctx.kind.removeprefix("aten::")
    axis = {"vsplit": 0, "hsplit": 1 if x.rank > 1 else 0, "dsplit": 2}[kind]
    n = x.type.shape[axis]
    spec = ctx.const(1)
    if isinstance(spec, (list, tuple)):
        return cut(ctx.b, x, axis, [0, *[int(i) for i in spec]])
    if not isinstance(n, int) or n % int(spec):
        raise ctx.unsupported(f"{kind} into {spec} sections of a dynamic or non-divisible axis")
    step = n // int(spec)
    return cut(ctx.b, x, axis, list(range(0, n, step)))
