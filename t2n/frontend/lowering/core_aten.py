"""Core-ATen ops that only ``torch.export`` programs contain (after
``run_decompositions()``): size queries as ``sym_*`` ops, the run-time checks the
exporter inserts, ``as_strided`` (what some decompositions leave for window views),
``_local_scalar_dense`` (``.item()``) and the functional training batch norm.

Every other core-ATen name is served by the rule of the family that already lowers it
for TorchScript graphs (``_softmax`` by softmax, ``native_layer_norm`` by layer norm,
``convolution`` by conv, ...), so both frontends share one rule per op.
"""

from __future__ import annotations

from typing import Any

from t2n.frontend.context import LoweringContext, Poison
from t2n.frontend.helpers import dims_product, i64, reshape, scalar
from t2n.frontend.lowering.norm import batch_stats_norm, running_stats_norm, upcast
from t2n.frontend.lowering.prim import numel, size
from t2n.frontend.lowering.storage import storage_read, traced_input
from t2n.frontend.lowering.storage import strided_indices as strided_indices
from t2n.frontend.registry import RuleSet
from t2n.ir import DType, Value

RULES = RuleSet("core_aten")


# -- size queries ----------------------------------------------------------------------
@RULES.rule("aten::sym_size")
def sym_size(ctx: LoweringContext) -> Any:
    """``sym_size.int(x, dim)`` (one size) or ``sym_size(x)`` (all): as ``x.size()``, a
    number when the axis is static, else a graph value that follows the symbol."""
    return size(ctx)


@RULES.rule("aten::sym_numel")
def sym_numel(ctx: LoweringContext) -> Any:
    x = ctx.tensor(0)
    n = dims_product(x.type.shape)
    if ctx.lowering.static_sizes and isinstance(n, int):
        return n
    return numel(ctx)


def _contiguous_strides(ctx: LoweringContext, x: Value) -> list[Any]:
    """The strides of ``x`` laid out row-major (every IR tensor is): the product of
    the sizes after each axis, numbers where those sizes are static."""
    shape = list(x.type.shape)
    static = all(isinstance(d, int) for d in shape) and ctx.lowering.static_sizes
    out: list[Any] = []
    for axis in range(len(shape)):
        if static:
            out.append(dims_product(shape[axis + 1:]))
            continue
        b = ctx.b
        tail = b.op("slice", b.op("shape_of", x), b.ints([axis + 1]), b.ints([len(shape)]),
                    axes=(0,), steps=(1,))
        out.append(b.op("prod_reduce", tail, axes=(0,), keepdims=False))
    return out


def _strides(ctx: LoweringContext, x: Value) -> list[Any]:
    """``x.stride()`` in PyTorch: a view's strides as the frontend recorded them (numbers:
    a view's strides follow no symbol here), row-major ones otherwise."""
    me = traced_input(ctx)
    layout = me.layout() if me is not None else None
    if layout is not None and not layout.contiguous:
        if not x.type.shape.is_static:
            raise ctx.unsupported("the strides of a non-contiguous view whose sizes are symbolic; "
                                  "What to do: call .contiguous() before reading its strides")
        return list(layout.strides)
    if layout is None and me is not None and not me.symbolic_row_major():
        raise ctx.unsupported("the strides of a tensor whose layout is not known at export "
                              "(it may be a view); What to do: call .contiguous() before reading them")
    return _contiguous_strides(ctx, x)


@RULES.rule("aten::sym_stride", notes="a view's recorded strides; row-major for other tensors")
def sym_stride(ctx: LoweringContext) -> Any:
    x = ctx.tensor(0)
    strides = _strides(ctx, x)
    if ctx.n_inputs > 1 and not ctx.is_none(1):
        return strides[ctx.axis(1, x.rank)]
    return strides


@RULES.rule("aten::sym_storage_offset")
def sym_storage_offset(ctx: LoweringContext) -> int:
    """A view's offset into its base's memory as recorded; an input's own buffer starts at 0."""
    me = traced_input(ctx)
    layout = me.layout() if me is not None else None
    if layout is not None and layout.offset is not None:
        return layout.offset
    if me is None or me.symbolic_row_major():
        return 0
    raise ctx.unsupported("the storage offset of a tensor whose layout is not known at export")


@RULES.rule("aten::sym_is_contiguous")
def sym_is_contiguous(ctx: LoweringContext) -> bool:
    me = traced_input(ctx)
    layout = me.layout() if me is not None else None
    if layout is not None:
        return layout.contiguous
    if me is None or me.symbolic_row_major():
        return True
    raise ctx.unsupported("whether a tensor whose layout is not known at export is contiguous")


# -- run-time checks -------------------------------------------------------------------
@RULES.rule("aten::_assert_scalar", "aten::_assert_async", "aten::sym_constrain_range",
            "aten::sym_constrain_range_for_size", "aten::_functional_assert_scalar",
            "aten::_functional_assert_async", "aten::_functional_sym_constrain_range",
            "aten::_functional_sym_constrain_range_for_size", "aten::_make_dep_token",
            notes="checked by PyTorch at export; the program's size ranges are asserted separately")
def runtime_check(ctx: LoweringContext) -> None:
    """Checks torch.export inserts for sizes and data-dependent values. They produce
    nothing the model computes with (at most a dependency token nobody reads)."""
    return None


# -- scalars and strided views ---------------------------------------------------------
@RULES.rule("aten::_local_scalar_dense")
def local_scalar_dense(ctx: LoweringContext) -> Any:
    """``x.item()``: the one element, kept as a 0-d graph value (a size read from it
    must still follow dynamic axes); rules that need a number ask for a constant."""
    x = ctx.raw(0)
    if not isinstance(x, Value):
        return x
    n = dims_product(x.type.shape)
    if isinstance(n, int) and n != 1:
        raise ctx.unsupported(f"item() of a tensor of {n} elements (it needs exactly one)")
    return reshape(ctx.b, x, []) if x.rank else x


@RULES.rule("aten::as_strided", "aten::as_strided_copy",
            notes="indexes its input's storage as PyTorch does (a view's strides and offset as "
                  "recorded at trace time); sizes and strides must be constants")
def as_strided(ctx: LoweringContext) -> Value:
    """A gather at constant positions, from the input or from the tensor whose memory it
    views (see :mod:`t2n.frontend.lowering.storage`); refused when that memory is unknown."""
    x = ctx.tensor(0)
    sizes, strides = ctx.ints(1), ctx.ints(2)
    offset = None if ctx.is_none(3) else ctx.int(3)
    if len(sizes) != len(strides):
        raise ctx.unsupported(f"as_strided with {len(sizes)} sizes but {len(strides)} strides")
    if any(s < 0 for s in strides) or (offset is not None and offset < 0):
        raise ctx.unsupported("as_strided with a negative stride or storage offset")
    src, idx = storage_read(ctx, x, sizes, strides, offset)
    flat = reshape(ctx.b, src, [dims_product(src.type.shape)])
    return ctx.b.op("gather", flat, ctx.b.const(idx, DType.I64), axis=0)


# -- normalization -----------------------------------------------------------------------
def _updated_running(ctx: LoweringContext, running: Value, batch: Value,
                     momentum: float) -> Value:
    """(1 - momentum) · running + momentum · batch, what training writes back."""
    b = ctx.b
    dt = running.type.dtype
    keep = b.op("mul", running, scalar(b, 1.0 - momentum, dt))
    return b.op("add", keep, b.op("mul", b.cast(batch, dt), scalar(b, momentum, dt)))


def _batch_moments(ctx: LoweringContext, x: Value) -> tuple[Value, Value]:
    """Per-channel mean and unbiased variance over every axis but 1 (the running
    variance PyTorch stores uses Bessel's correction)."""
    b = ctx.b
    xs = upcast(b, x)
    axes = (0, *range(2, x.rank))
    mean = b.op("mean_reduce", xs, axes=axes, keepdims=True)
    centered = b.op("sub", xs, mean)
    sq = b.op("sum_reduce", b.op("mul", centered, centered), axes=axes, keepdims=False)
    count = dims_product([x.type.shape[a] for a in axes])
    if isinstance(count, int):
        denom: Value = scalar(b, max(count - 1, 1), xs.type.dtype)
    else:
        n = b.op("prod_reduce", b.op("gather", b.op("shape_of", x), b.ints(list(axes)), axis=0),
                 axes=(0,), keepdims=False)
        denom = b.cast(b.op("sub", n, i64(b, 1)), xs.type.dtype)
    return reshape(b, mean, [x.type.shape[1]]), b.op("div", sq, denom)


@RULES.rule("aten::_native_batch_norm_legit_functional")
def native_batch_norm_functional(ctx: LoweringContext) -> tuple[Any, ...]:
    """(out, saved mean, saved rstd, new running mean, new running var). The running
    statistics are updated as training mode does (the program writes them back to the
    buffers); the saved statistics are training-only outputs."""
    x = ctx.tensor(0)
    if x.rank < 2:
        raise ctx.unsupported(f"batch norm of a rank-{x.rank} tensor")
    dt = x.type.dtype
    w, bias = ctx.optional_tensor(1, dt), ctx.optional_tensor(2, dt)
    mean, var = ctx.tensor(3), ctx.tensor(4)
    training, momentum, eps = ctx.bool(5), ctx.float(6), ctx.float(7)
    saved = Poison("the saved statistics of a batch norm (training-time outputs) cannot be exported")
    if not training:
        out = running_stats_norm(ctx, x, w, bias, ctx.b.cast(mean, dt), ctx.b.cast(var, dt), eps)
        return out, saved, saved, mean, var
    out = batch_stats_norm(ctx, x, w, bias, [0, *range(2, x.rank)], eps)
    batch_mean, batch_var = _batch_moments(ctx, x)
    return (out, saved, saved, _updated_running(ctx, mean, batch_mean, momentum),
            _updated_running(ctx, var, batch_var, momentum))
