"""Shape and movement aten ops. Sizes are taken from the graph (``shape_of``), never
from the traced example, so that they stay right under dynamic axes."""

from __future__ import annotations

from typing import Any

from t2n.frontend.context import LoweringContext, norm_axis
from t2n.frontend.registry import RuleSet
from t2n.ir import Builder, DType, Value
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


@RULES.rule("aten::view", "aten::reshape", "aten::_reshape_alias", "aten::_unsafe_view")
def view(ctx: LoweringContext) -> Value:
    return ctx.b.op("reshape", ctx.tensor(0), ctx.shape_tensor(1))


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
