"""Shape and movement aten ops. Sizes are taken from the graph (``shape_of``), never
from the traced example, so that they stay right under dynamic axes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from t2n.frontend.context import LoweringContext, norm_axis
from t2n.frontend.helpers import from_tensor_data
from t2n.frontend.lowering.creation import data_positions
from t2n.frontend.lowering.folding import folded_int
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
    if target.known is None:
        target = _data_sized_target(ctx, target)
    if target.known is None and traced is not None:
        target = ctx.b.ints(traced)
    return ctx.b.op("reshape", ctx.tensor(0), target)


def _data_sized_target(ctx: LoweringContext, target: Value) -> Value:
    """A target with one size computed from tensor data (``view(n, 3)`` with ``n`` an
    input) is written with ``-1`` there; more than one such size is refused (no
    traced size may stand for them: they change with the data)."""
    items = ctx.raw(1)
    if not isinstance(items, (list, tuple)):
        return target
    data = [i for i, v in enumerate(items) if isinstance(v, Value) and v.known is None and from_tensor_data(v)]
    if not data:
        return target
    rest = [v for i, v in enumerate(items) if i not in data]
    if len(data) > 1 or any(not isinstance(v, int) or v == -1 for v in rest):
        raise ctx.unsupported("a reshape to several sizes computed from tensor data (each changes "
                              "with the data, and only one can be inferred)")
    return ctx.b.ints([-1 if i in data else int(v) for i, v in enumerate(items)])


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
def slice_(ctx: LoweringContext) -> Any:
    items = ctx.raw(0)
    if isinstance(items, (list, tuple)):  # a list of sizes: ``x.shape[-2:]`` in scripted code
        start, end, step = (ctx.optional(i) if ctx.n_inputs > i else None for i in (1, 2, 3))
        return list(items)[start:end:step]
    x = ctx.tensor(0)
    sliced = slice_arguments(ctx, x.rank)
    if sliced is None:
        return x
    axis, start, end, step = sliced
    if step == 1 and start.known is not None and start.known.tolist() == [0]:
        positions = data_positions(ctx.b, ctx.optional(3) if ctx.n_inputs > 3 else None)
        if positions is not None:  # ``table[:y.shape[1]]`` of a length from data: a gather of its range
            return ctx.b.op("gather", x, positions, axis=axis)
    return ctx.b.op("slice", x, start, end, axes=(axis,), steps=(step,))


def slice_arguments(ctx: LoweringContext, rank: int) -> tuple[int, Value, Value, int] | None:
    """``aten::slice``'s axis, start and end bounds and step over a tensor of ``rank``
    (PyTorch's "to the end" sentinel as no end), or ``None`` when it keeps everything."""
    axis = ctx.axis(1, rank) if not ctx.is_none(1) else 0
    step = ctx.int(4) if ctx.n_inputs > 4 and not ctx.is_none(4) else 1
    start = ctx.optional(2) if ctx.n_inputs > 2 else None
    end = ctx.optional(3) if ctx.n_inputs > 3 else None
    if isinstance(end, int) and end >= INT64_MAX // 2:
        end = None
    if start in (None, 0) and end is None and step == 1:
        return None
    return axis, bound(ctx, start, 0), bound(ctx, end, INT64_MAX), step


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


@RULES.rule("aten::narrow", "aten::narrow_copy")
def narrow(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    axis = ctx.axis(1, x.rank)
    start, length = (folded_int(v) for v in (ctx.raw(2), ctx.raw(3)))
    if isinstance(start, int) and isinstance(length, int):
        end = start + length
        # A negative start counts from the end, python-style, as the slice bounds do.
        return slice_axis(ctx.b, x, axis, start, None if start < 0 and end == 0 else end)
    b = ctx.b
    begin = b.cast(ctx.as_value(start), DType.I64)
    stop = b.op("add", begin, b.cast(ctx.as_value(length), DType.I64))
    return slice_axis(b, x, axis, begin, stop)


@RULES.rule("aten::broadcast_tensors")
def broadcast_tensors(ctx: LoweringContext) -> list[Value]:
    """Each tensor expanded to the common broadcast shape (sizes as traced; under dynamic
    axes the baked-size check reports a size that should have followed a symbol)."""
    from t2n.ir.infer_utils import broadcast_shapes

    raw: Any = ctx.raw(0)
    items = [ctx.as_value(v) for v in raw]
    shape = list(broadcast_shapes(*[v.type.shape for v in items]))
    return [v if list(v.type.shape) == shape else ctx.b.op("expand", v, ctx.b.ints(shape)) for v in items]
