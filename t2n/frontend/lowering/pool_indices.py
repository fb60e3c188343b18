"""Max pooling with indices (``return_indices=True``) and its partial inverse
``max_unpool``: the pair encoder-decoder segmentation nets (SegNet, ENet) are made of.

An index is PyTorch's: the flat position of the maximum in its (batch item, channel)
input plane. ``max_unpool`` writes each value at its index in a zero plane (one
element-wise scatter over the flattened plane). PyTorch raises on an index outside
the output plane; an engine cannot raise, so such an index writes nothing (indices
taken straight from the matching pool are in range and need no guard).
"""

from __future__ import annotations

from collections.abc import Sequence

from t2n.frontend.context import LoweringContext, Poison
from t2n.frontend.helpers import dim_value, dims_product, i64
from t2n.frontend.lowering.conv import adaptive_pool, adaptive_sizes, adaptive_windows, pool_attrs
from t2n.frontend.registry import RuleSet
from t2n.ir import Dim, DType, Value

RULES = RuleSet("pool_indices")


@RULES.rule("aten::max_pool1d_with_indices", "aten::max_pool2d_with_indices",
            "aten::max_pool3d_with_indices")
def max_pool_with_indices(ctx: LoweringContext) -> tuple[Value, ...]:
    attrs, _, _ = pool_attrs(ctx, int(ctx.kind[len("aten::max_pool")]))
    return ctx.b.multi("max_pool_with_index", ctx.tensor(0), **attrs)


@RULES.rule("aten::adaptive_max_pool1d", "aten::adaptive_max_pool2d", "aten::adaptive_max_pool3d")
def adaptive_max_pool(ctx: LoweringContext) -> tuple[Value, Value | Poison]:
    """The values as before (reductions over slices, exact at any size); the indices,
    when read, from a max pool when the windows tile every axis evenly, else one axis
    at a time (the first maximum of each window, as PyTorch)."""
    n = int(ctx.kind.rstrip("d")[-1])
    x = ctx.tensor(0)
    sizes = adaptive_sizes(ctx, n)
    values = adaptive_pool(ctx, x, n, sizes, "max_reduce")
    if all(o == 1 for o in sizes):
        return values, _global_index(ctx, x, n)
    if not all(isinstance(d, int) for d in x.type.shape[x.rank - n:]):
        return values, Poison("the indices of an adaptive max pool over a dynamic axis cannot be "
                              "exported (its windows depend on the size); fix that axis' size")
    def size(i: int) -> int:
        """Read through the graph, so that DynamicAxes reports it if the axis is made dynamic."""
        axis = x.rank - n + i
        return int(ctx.to_const(dim_value(ctx.b, x, axis), f"size of axis {axis} (adaptive max pool indices)"))

    traced = [int(d) for d in x.type.shape[x.rank - n:]]  # type: ignore[call-overload]
    if all(o is None or d % o == 0 for d, o in zip(traced, sizes)):
        kernel = tuple(1 if o is None else size(i) // o for i, o in enumerate(sizes))
        _, index = ctx.b.multi("max_pool_with_index", x, kernel=kernel, stride=kernel,
                               dilation=(1,) * n, padding=((0, 0),) * n)
        return values, index
    static = [size(i) for i in range(n)]
    return values, _separable_index(ctx, x, static, [d if o is None else o for d, o in zip(static, sizes)])


def _global_index(ctx: LoweringContext, x: Value, n: int) -> Value:
    """One window over the whole plane: the first maximum of the flattened plane (at
    any size: nothing is read from the shapes)."""
    b = ctx.b
    lead = x.rank - n
    best = b.op("argmax_reduce", _flattened(ctx, x, lead), axes=(lead,), keepdims=True)
    return b.op("unsqueeze", best, axes=tuple(range(lead + 1, lead + n))) if n > 1 else best


def _separable_index(ctx: LoweringContext, x: Value, plane: list[int], outs: list[int]) -> Value:
    """Plane index of each adaptive window's first maximum, the last axis first: along
    an axis, the window's argmax picks which row's index (from the axes already done)
    is kept, plus that position times the axis' stride in the plane."""
    b = ctx.b
    n = len(plane)
    values, index = x, None
    stride = 1
    for i in reversed(range(n)):
        axis = x.rank - n + i
        value_parts, index_parts = [], []
        for start, end in adaptive_windows(plane[i], outs[i]):
            part = b.op("slice", values, b.ints([start]), b.ints([end]), axes=(axis,), steps=(1,))
            best = b.op("argmax_reduce", part, axes=(axis,), keepdims=True)
            value_parts.append(b.op("max_reduce", part, axes=(axis,), keepdims=True))
            where = b.op("mul", b.op("add", best, i64(b, start)), i64(b, stride))
            if index is not None:
                rows = b.op("slice", index, b.ints([start]), b.ints([end]), axes=(axis,), steps=(1,))
                where = b.op("add", where, b.op("gather_elements", rows, best, axis=axis))
            index_parts.append(where)
        values = b.op("concat", *value_parts, axis=axis)
        index = b.op("concat", *index_parts, axis=axis)
        stride *= plane[i]
    assert index is not None
    return index


# -- max_unpool ----------------------------------------------------------------------

def _sizes(ctx: LoweringContext, n: int) -> list[Dim | Value]:
    """The output's spatial sizes (``output_size``: ints, or run-time size values)."""
    raw = ctx.raw(2)
    items = [raw] if isinstance(raw, (int, Value)) else list(raw)
    if isinstance(raw, Value) and raw.rank == 1:
        items = [ctx.b.op("gather", raw, i64(ctx.b, i), axis=0) for i in range(n)]
    if len(items) == n + 2:
        items = items[2:]
    if len(items) != n:
        raise ctx.unsupported(f"output_size with {len(items)} entries for {n} spatial axes")
    if not ctx.lowering.static_sizes:
        return items  # size arithmetic stays in the graph: a dynamic axis may change it
    return [_static(v) for v in items]


def _static(v: Dim | Value) -> Dim | Value:
    """A size value that inference computed as an int (no dynamic axis is asked for)."""
    if isinstance(v, Value) and v.known is not None and v.known.dtype != object and v.known.size == 1:
        return int(v.known.reshape(()))
    return v


def _lead_dims(ctx: LoweringContext, x: Value, lead: int) -> list[int | Value]:
    """The batch and channel sizes, read through the graph (they may be made dynamic)."""
    return [dim_value(ctx.b, x, a) for a in range(lead)]


def _flattened(ctx: LoweringContext, x: Value, lead: int) -> Value:
    """``x`` with its axes after ``lead`` flattened into one (any size)."""
    b = ctx.b
    head = b.op("slice", b.op("shape_of", x), b.ints([0]), b.ints([lead]), axes=(0,), steps=(1,))
    return b.op("reshape", x, b.op("concat", head, b.ints([-1]), axis=0))


def _product(ctx: LoweringContext, sizes: Sequence[Dim | Value]) -> int | Value:
    if all(isinstance(s, int) for s in sizes):
        return int(dims_product([s for s in sizes if isinstance(s, int)]))
    out: Value = i64(ctx.b, 1)
    for s in sizes:
        out = ctx.b.op("mul", out, s if isinstance(s, Value) else i64(ctx.b, int(s)))  # type: ignore[arg-type]
    return out


def _from_matching_pool(idx: Value, sizes: Sequence[Dim | Value]) -> bool:
    """Whether ``idx`` comes straight from a max pool (through unit axes added or
    removed, as ``max_unpool1d`` does) over a plane as large as ``sizes``: every index
    then lies inside the output plane."""
    while idx.producer is not None and idx.producer.kind in ("unsqueeze", "squeeze"):
        idx = idx.producer.inputs[0]
    p = idx.producer
    if p is None or p.kind != "max_pool_with_index" or idx is not p.outputs[1]:
        return False
    if not all(isinstance(s, int) for s in sizes):
        return False
    plane = p.inputs[0].type.shape[-len(p.attrs["kernel"]):]
    return all(isinstance(d, int) for d in plane) and \
        dims_product(list(plane)) == dims_product([s for s in sizes if isinstance(s, int)])


@RULES.rule("aten::max_unpool2d", "aten::max_unpool3d")
def max_unpool(ctx: LoweringContext) -> Value:
    """``out.flat[n, c, idx[n, c, i]] = x[n, c, i]`` in a zero plane of ``output_size``."""
    b = ctx.b
    n = int(ctx.kind[-2])
    x = ctx.tensor(0)
    idx = ctx.tensor(1, DType.I64)
    if x.rank not in (n + 1, n + 2) or idx.rank != x.rank:
        raise ctx.unsupported(f"input of rank {x.rank} and indices of rank {idx.rank}; "
                              f"max_unpool{n}d takes equal ranks {n + 1} or {n + 2}")
    sizes = _sizes(ctx, n)
    lead = x.rank - n
    lead_dims = _lead_dims(ctx, x, lead)
    plane = _product(ctx, sizes)
    # with dynamic axes, sizes equal at trace time may differ at run time: keep the guard
    guarded = not (ctx.lowering.static_sizes and _from_matching_pool(idx, sizes))
    room: int | Value = plane
    if guarded:
        plane_v = plane if isinstance(plane, Value) else i64(b, plane)
        inside = b.op("and", b.op("ge", idx, i64(b, 0)), b.op("lt", idx, plane_v))
        idx = b.op("select", inside, idx, plane_v)  # one spare cell, cut below
        room = b.op("add", plane_v, i64(b, 1)) if isinstance(plane, Value) else plane + 1
    zeros = b.op("expand", b.const(0, x.type.dtype), ctx.shape_tensor([*lead_dims, room]))
    out = b.op("unpool_scatter", zeros, idx, x, lead=lead)
    if guarded:
        end = b.op("reshape", plane, b.ints([1])) if isinstance(plane, Value) else b.ints([plane])
        out = b.op("slice", out, b.ints([0]), end, axes=(lead,), steps=(1,))
    return b.op("reshape", out, ctx.shape_tensor([*lead_dims, *sizes]))
