"""Reductions and softmax."""

from __future__ import annotations

from typing import Any

from t2n.frontend.context import LoweringContext, norm_axis
from t2n.frontend.helpers import dims_product
from t2n.frontend.registry import RuleSet
from t2n.ir import DType, Value

RULES = RuleSet("reduce")


def reduce_axes(ctx: LoweringContext, x: Value, key: int | str = 1) -> tuple[int, ...]:
    if not ctx.has(key) or ctx.is_none(key):
        return tuple(range(x.rank))
    dims = ctx.ints(key)
    if not dims:
        return tuple(range(x.rank))
    return tuple(sorted({norm_axis(d, x.rank) for d in dims}))


def _keepdim(ctx: LoweringContext) -> bool:
    return ctx.bool("keepdim") if ctx.has("keepdim") else False


def _asked_dtype(ctx: LoweringContext) -> DType | None:
    """The op's ``dtype=`` argument (reductions and scans compute in it), if given."""
    return ctx.dtype_arg("dtype") if ctx.has("dtype") else None


def _in_asked_dtype(ctx: LoweringContext, x: Value) -> Value:
    dt = _asked_dtype(ctx)
    return ctx.b.cast(x, dt) if dt is not None else x


@RULES.rule("aten::mean")
def mean(ctx: LoweringContext) -> Value:
    x = _in_asked_dtype(ctx, ctx.tensor(0))
    if x.rank == 0:
        return x
    return ctx.b.op("mean_reduce", x, axes=reduce_axes(ctx, x), keepdims=_keepdim(ctx))


def accumulated(ctx: LoweringContext) -> Value:
    """The input in the dtype sums and products (and their running forms, cumsum and
    cumprod) accumulate in: the ``dtype`` argument, else i64 for integers and bools
    (PyTorch's rule), else the input's own."""
    x = ctx.tensor(0)
    dt = _asked_dtype(ctx)
    if dt is None and not x.type.dtype.is_float:
        dt = DType.I64
    return ctx.b.cast(x, dt) if dt is not None else x


@RULES.rule("aten::sum")
def sum_(ctx: LoweringContext) -> Value:
    x = accumulated(ctx)
    if x.rank == 0:
        return x
    return ctx.b.op("sum_reduce", x, axes=reduce_axes(ctx, x), keepdims=_keepdim(ctx))


@RULES.rule("aten::softmax", "aten::_softmax", "aten::log_softmax", "aten::_log_softmax")
def softmax(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    dt = None
    if ctx.has("dtype") and not ctx.is_none("dtype"):
        dt = ctx.dtype_arg("dtype")
    elif ctx.kind.startswith("aten::_") and ctx.bool(2):
        dt = DType.F32  # half_to_float
    if dt is not None:
        x = ctx.b.cast(x, dt)
    if not x.type.dtype.is_float:
        x = ctx.b.cast(x, DType.F32)
    if x.rank == 0:
        return x
    axis = ctx.axis(1, x.rank)
    kind = "log_softmax" if "log" in ctx.kind else "softmax"
    return ctx.b.op(kind, x, axes=(axis,))


@RULES.rule("aten::prod")
def prod(ctx: LoweringContext) -> Value:
    x = accumulated(ctx)
    if x.rank == 0:
        return x
    axes = (ctx.axis("dim", x.rank),) if ctx.has("dim") and not ctx.is_none("dim") else tuple(range(x.rank))
    return ctx.b.op("prod_reduce", x, axes=axes, keepdims=_keepdim(ctx))


# -- extrema, arg-extrema, logical reductions -----------------------------------------
def _dims_arg(ctx: LoweringContext, x: Value, key: str | int) -> tuple[int, ...]:
    """A ``dim`` argument that may be an int, a list, or None (all axes)."""
    if not ctx.has(key) or ctx.is_none(key):
        return tuple(range(x.rank))
    raw = ctx.const(key)
    dims = [raw] if isinstance(raw, int) else list(raw)
    if not dims:
        return tuple(range(x.rank))
    return tuple(sorted({norm_axis(d, x.rank) for d in dims}))


def _reduce(ctx: LoweringContext, kind: str, x: Value, axes: tuple[int, ...], keepdim: bool) -> Value:
    if x.rank == 0 or not axes:
        return x
    if x.type.dtype is DType.BOOL and kind in ("max_reduce", "min_reduce"):
        kind = "any_reduce" if kind == "max_reduce" else "all_reduce"
    return ctx.b.op(kind, x, axes=axes, keepdims=keepdim)


def _nan_aware_extreme(ctx: LoweringContext, kind: str, x: Value, axes: tuple[int, ...], keepdim: bool) -> Value:
    """max/min reductions propagate NaN in PyTorch; engines' reductions may not."""
    out = _reduce(ctx, kind, x, axes, keepdim)
    if x.type.dtype.is_float and x.rank and axes:
        has_nan = ctx.b.op("any_reduce", ctx.b.op("is_nan", x), axes=axes, keepdims=keepdim)
        out = ctx.b.op("select", has_nan, ctx.as_value(float("nan"), x.type.dtype), out)
    return out


@RULES.rule("aten::max", "aten::min")
def max_min(ctx: LoweringContext) -> Value | tuple[Value, Value]:
    """Three overloads: full reduction, (values, indices) over ``dim``, and the binary
    element-wise form (``torch.max(a, b)``)."""
    kind = "max" if "max" in ctx.kind else "min"
    if ctx.n_inputs == 2 and isinstance(ctx.raw(1), Value):
        from t2n.frontend.lowering.arithmetic import extremum

        return extremum(ctx)
    x = ctx.tensor(0)
    if ctx.n_inputs == 1:
        return _nan_aware_extreme(ctx, f"{kind}_reduce", x, tuple(range(x.rank)), False)
    axis = ctx.axis(1, max(x.rank, 1))
    keep = ctx.bool(2) if ctx.n_inputs > 2 else False
    if x.rank == 0:
        return x, ctx.as_value(0, DType.I64)
    values = _nan_aware_extreme(ctx, f"{kind}_reduce", x, (axis,), keep)
    indices = _arg(ctx, "argmax_reduce" if kind == "max" else "argmin_reduce", x, axis, keep)
    return values, indices


def _arg(ctx: LoweringContext, kind: str, x: Value, axis: int, keep: bool) -> Value:
    if x.type.dtype is DType.BOOL:
        x = ctx.b.cast(x, DType.I32)
    return ctx.b.op(kind, x, axes=(axis,), keepdims=keep)


@RULES.rule("aten::amax", "aten::amin")
def amax(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    kind = "max_reduce" if "amax" in ctx.kind else "min_reduce"
    return _nan_aware_extreme(ctx, kind, x, _dims_arg(ctx, x, 1), _keepdim(ctx))


@RULES.rule("aten::aminmax")
def aminmax(ctx: LoweringContext) -> tuple[Value, Value]:
    x = ctx.tensor(0)
    axes = _dims_arg(ctx, x, "dim")
    keep = _keepdim(ctx)
    return (_nan_aware_extreme(ctx, "min_reduce", x, axes, keep),
            _nan_aware_extreme(ctx, "max_reduce", x, axes, keep))


@RULES.rule("aten::argmax", "aten::argmin")
def argmax(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    kind = "argmax_reduce" if "argmax" in ctx.kind else "argmin_reduce"
    keep = _keepdim(ctx)
    if ctx.n_inputs < 2 or ctx.is_none(1):
        flat = ctx.b.op("reshape", x, ctx.b.ints([dims_product(x.type.shape)])) if x.rank != 1 else x
        out = _arg(ctx, kind, flat, 0, False)
        if keep:
            out = ctx.b.op("reshape", out, ctx.b.ints([1] * x.rank))
        return out
    if x.rank == 0:
        return ctx.as_value(0, DType.I64)
    return _arg(ctx, kind, x, ctx.axis(1, x.rank), keep)


@RULES.rule("aten::any", "aten::all", "aten::_is_all_true")
def any_all(ctx: LoweringContext) -> Value:
    """``_is_all_true`` is ``all`` of a bool tensor (what ``torch._check`` on a tensor
    and ``torch.all(...).item()``-style guards record under torch.export)."""
    x = ctx.tensor(0)
    if x.type.dtype is not DType.BOOL:
        x = ctx.b.op("ne", x, ctx.as_value(0, x.type.dtype))
    kind = "any_reduce" if "any" in ctx.kind else "all_reduce"
    return _reduce(ctx, kind, x, _dims_arg(ctx, x, 1), _keepdim(ctx))


@RULES.rule("aten::count_nonzero")
def count_nonzero(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    nz = ctx.b.cast(ctx.b.op("ne", x, ctx.as_value(0, x.type.dtype)), DType.I64)
    return _reduce(ctx, "sum_reduce", nz, _dims_arg(ctx, x, 1), False)


@RULES.rule("aten::nansum", "aten::nanmean")
def nansum(ctx: LoweringContext) -> Value:
    x = _in_asked_dtype(ctx, ctx.tensor(0))
    axes, keep = _dims_arg(ctx, x, 1), _keepdim(ctx)
    nan = ctx.b.op("is_nan", x)
    clean = ctx.b.op("select", nan, ctx.as_value(0, x.type.dtype), x)
    total = _reduce(ctx, "sum_reduce", clean, axes, keep)
    if "nanmean" not in ctx.kind:
        return total
    count = _reduce(ctx, "sum_reduce", ctx.b.cast(ctx.b.op("not", nan), x.type.dtype), axes, keep)
    return ctx.b.op("div", total, count)


# -- moments and norms ---------------------------------------------------------------------
def _count(ctx: LoweringContext, x: Value, axes: tuple[int, ...]) -> Value:
    """The number of reduced elements as a float of ``x``'s dtype (follows dynamic axes)."""
    from t2n.frontend.helpers import dim_value

    n: Value | None = None
    for a in axes:
        d = dim_value(ctx.b, x, a)
        n = d if n is None else ctx.b.op("mul", n, d)
    assert n is not None
    return ctx.b.cast(n, x.type.dtype)


def _correction(ctx: LoweringContext) -> float:
    if ctx.has("correction"):
        return 1.0 if ctx.is_none("correction") else float(ctx.const("correction"))
    if ctx.has("unbiased"):
        return 1.0 if ctx.bool("unbiased") else 0.0
    return 1.0


def variance(ctx: LoweringContext, x: Value, axes: tuple[int, ...], keep: bool, correction: float) -> tuple[Value, Value]:
    """(variance, mean) over ``axes``: the mean of squared deviations from the mean."""
    b = ctx.b
    mean_k = b.op("mean_reduce", x, axes=axes, keepdims=True)
    dev = b.op("sub", x, mean_k)
    ss = b.op("sum_reduce", b.op("mul", dev, dev), axes=axes, keepdims=keep)
    denom = _count(ctx, x, axes)
    if correction:
        denom = b.op("sub", denom, ctx.as_value(correction, x.type.dtype))
        denom = b.op("max", denom, ctx.as_value(0.0, x.type.dtype))
    var = b.op("div", ss, denom)
    mean = mean_k if keep else b.op("squeeze", mean_k, axes=axes)
    return var, mean


@RULES.rule("aten::var", "aten::std", "aten::var_mean", "aten::std_mean")
def var(ctx: LoweringContext) -> Value | tuple[Value, Value]:
    x = ctx.tensor(0)
    if not x.type.dtype.is_float:
        x = ctx.b.cast(x, DType.F32)
    if x.rank == 0:
        raise ctx.unsupported("variance of a 0-d tensor")
    axes = _dims_arg(ctx, x, "dim") if ctx.has("dim") else tuple(range(x.rank))
    v, m = variance(ctx, x, axes, _keepdim(ctx), _correction(ctx))
    if "std" in ctx.kind:
        v = ctx.b.op("sqrt", v)
    return (v, m) if ctx.kind.endswith("_mean") else v


def vector_norm(ctx: LoweringContext, x: Value, p: float, axes: tuple[int, ...], keep: bool) -> Value:
    b = ctx.b
    a = b.op("abs", x)
    if p == float("inf"):
        return b.op("max_reduce", a, axes=axes, keepdims=keep)
    if p == float("-inf"):
        return b.op("min_reduce", a, axes=axes, keepdims=keep)
    if p == 0:
        nz = b.cast(b.op("ne", x, ctx.as_value(0.0, x.type.dtype)), x.type.dtype)
        return b.op("sum_reduce", nz, axes=axes, keepdims=keep)
    if p == 1:
        return b.op("sum_reduce", a, axes=axes, keepdims=keep)
    if p == 2:
        return b.op("sqrt", b.op("sum_reduce", b.op("mul", x, x), axes=axes, keepdims=keep))
    powered = b.op("pow", a, ctx.as_value(p, x.type.dtype))
    s = b.op("sum_reduce", powered, axes=axes, keepdims=keep)
    return b.op("pow", s, ctx.as_value(1.0 / p, x.type.dtype))


@RULES.rule("aten::linalg_vector_norm", "aten::norm", "aten::frobenius_norm", "aten::linalg_norm")
def norm(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    if ctx.kind == "aten::frobenius_norm":
        p: Any = 2.0
        axes = _dims_arg(ctx, x, 1)
    else:
        p = ctx.const(1) if ctx.n_inputs > 1 and not ctx.is_none(1) else 2.0
        axes = _dims_arg(ctx, x, 2) if ctx.n_inputs > 2 else tuple(range(x.rank))
    if isinstance(p, str):
        if p != "fro":
            raise ctx.unsupported(f"matrix norm ord={p!r}")
        p = 2.0
    if ctx.kind == "aten::linalg_norm" and ctx.n_inputs > 1 and not ctx.is_none(1) and len(axes) == 2 \
            and p not in (2.0, "fro"):
        raise ctx.unsupported(f"matrix norm ord={p!r}")
    x = _in_asked_dtype(ctx, x)
    if not x.type.dtype.is_float:
        x = ctx.b.cast(x, DType.F32)
    if x.rank == 0:
        return ctx.b.op("abs", x)
    return vector_norm(ctx, x, float(p), axes, _keepdim(ctx))


@RULES.rule("aten::logsumexp")
def logsumexp(ctx: LoweringContext) -> Value:
    """max + log(sum(exp(x - max))), with an all -inf slice giving -inf as in PyTorch."""
    x = ctx.tensor(0)
    if not x.type.dtype.is_float:
        x = ctx.b.cast(x, DType.F32)
    axes, keep = _dims_arg(ctx, x, 1), _keepdim(ctx)
    b = ctx.b
    m = b.op("max_reduce", x, axes=axes, keepdims=True)
    finite_m = b.op("select", b.op("is_inf", m), ctx.as_value(0.0, x.type.dtype), m)
    s = b.op("sum_reduce", b.op("exp", b.op("sub", x, finite_m)), axes=axes, keepdims=True)
    out = b.op("add", b.op("log", s), finite_m)
    return out if keep else b.op("squeeze", out, axes=axes)
