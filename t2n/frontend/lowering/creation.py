"""Tensor creation: ranges, filled tensors, identity matrices, linspace and logspace,
meshgrids and triangle indices.

Bounds and sizes that are graph values (``arange(x.size(1))``, ``zeros(x.size(0), 3)``)
stay graph values, so they follow dynamic axes. Creation from Python numbers alone is
computed here with PyTorch's formulas and becomes a constant.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from t2n.frontend.complex_tensors import (
    Complex,
    complex_arg,
    complex_shape,
    constant,
    from_parts,
    part,
    parts_dtype,
)
from t2n.frontend.context import LoweringContext
from t2n.frontend.helpers import from_tensor_data, scalar
from t2n.frontend.lowering.folding import fold
from t2n.frontend.registry import RuleSet
from t2n.ir import Builder, Dim, DType, Sym, Value
from t2n.ir.dims import data_dim, dim_symbols, is_data_symbol

RULES = RuleSet("creation")
COMPLEX_FILLS = RuleSet("complex_fill")
"""Factories of complex tensors, found by :func:`t2n.frontend.lowering.complex.complex_rule`."""


def out_dtype(ctx: LoweringContext, default: DType) -> DType:
    """The ``dtype`` argument, else the dtype the trace observed, else ``default``."""
    if ctx.has("dtype") and not ctx.is_none("dtype"):
        dt = ctx.dtype_arg("dtype")
        assert dt is not None
        return dt
    return ctx.traced_dtype() or default


def number_dtype(*xs: Any) -> DType:
    """PyTorch's default dtype for a factory given these numbers: bool, int64 or float32."""
    if all(isinstance(x, bool) or (isinstance(x, Value) and x.type.dtype is DType.BOOL) for x in xs):
        return DType.BOOL
    if all(isinstance(x, int) or (isinstance(x, Value) and not x.type.dtype.is_float) for x in xs):
        return DType.I64
    return DType.F32


def fill(ctx: LoweringContext, shape: Value, value: Any, dtype: DType) -> Value:
    """A tensor of ``shape`` (1-D i64 value) holding ``value`` (a number or a 0-d tensor).
    Sizes computed from tensor data (``zeros(n)`` with ``n`` an input) are the lengths of
    ranges: see :func:`data_sized`."""
    v = ctx.as_value(value, dtype)
    if v.rank != 0:
        v = ctx.b.op("reshape", v, ctx.b.ints([]))
    if shape.known is None and (sizes := fold(shape)) is not None:
        shape = ctx.b.ints([int(d) for d in sizes.reshape(-1)])  # computed from constants only
    if shape.known is None and from_tensor_data(shape):
        return data_sized(ctx, shape, v)
    return ctx.b.op("expand", v, shape)


def data_sized(ctx: LoweringContext, shape: Value, v: Value) -> Value:
    """``v`` (0-d) broadcast to ``shape``, whose entries may come from tensor data. Each
    such axis is ``r - r`` for a ``range`` ``r`` of that length (the engine's range takes
    a run-time end), static axes are zero constants, and the axes meet by broadcasting
    in an ``add``: every op reads a tensor of the full shape, because tract can neither
    broadcast a constant to a length it names at run time nor keep that shape through
    an op it folds to one operand (``select`` of two constants, ``x or true``, ``x * 0``)."""
    b = ctx.b
    rank = shape.type.shape[0]
    if not isinstance(rank, int):
        raise ctx.unsupported("a shape whose length is computed at run time")
    zero = i64_const(b, 0)
    grid: Value | None = None
    for axis, n in enumerate(_entries(ctx, shape, rank)):
        if n.known is not None:
            line = b.const(np.zeros(int(np.asarray(n.known).item()), dtype=np.int64), DType.I64)
        else:
            r = data_range(b, zero, n, i64_const(b, 1))
            line = b.op("sub", r, r)
        others = tuple(a for a in range(rank) if a != axis)
        line = b.op("unsqueeze", line, axes=others) if others else line
        grid = line if grid is None else b.op("add", grid, line)
    if grid is None:
        return v
    if v.type.dtype is DType.BOOL:  # `grid or v` would be folded to `v` by tract, losing the shape
        return b.op("ne", b.op("add", grid, b.cast(v, DType.I64)), zero)
    return b.op("add", b.cast(grid, v.type.dtype), v)


def _entries(ctx: LoweringContext, shape: Value, rank: int) -> list[Value]:
    """Each size of a shape value as a 0-d i64 value: the pieces it was concatenated
    from when it is a ``concat`` (so a known size stays known beside a data one)."""
    b = ctx.b
    op = shape.producer
    if op is not None and op.kind == "concat" and all(p.rank == 1 for p in op.inputs):
        out = []
        for piece in op.inputs:
            size = piece.type.shape[0]
            if not isinstance(size, int):
                break
            src = piece.producer
            if src is not None and src.kind == "reshape" and src.inputs[0].rank == 0:
                out.append(src.inputs[0])  # a size given as a 0-d value: that value itself
                continue
            out += [b.op("gather", piece, i64_const(b, i), axis=0) for i in range(size)]
        else:
            if len(out) == rank:
                return out
    return [b.op("gather", shape, i64_const(b, i), axis=0) for i in range(rank)]


def data_range(b: Builder, start: Value, end: Value, step: Value) -> Value:
    """``range(start, end, step)`` whose bounds come from tensor data: its length is a
    data dimension (the engine names it at run time). One range serves every use of the
    same bounds: tract gives each range op its own length, and could not tell that two
    ranges to the same end agree."""
    bounds = (start, end, step)
    for op in b.graph.users(end):
        if op.kind == "range" and op.attrs.get("data_dim") and all(
                _same_bound(x, y) for x, y in zip(op.inputs, bounds)):
            return op.output
    return b.op("range", start, end, step, data_dim=b.graph.unique_name("range_len"))


def data_positions(b: Builder, n: object) -> Value | None:
    """``0, 1, ..., n - 1`` when ``n`` (a 0-d size value) is the length of a range made from
    tensor data: that range itself. Its length then stays the one tract names for the
    range, where a new range to the same length would need it written in graph.nnef
    (``torch.arange(y.shape[1])`` of a length-regulated ``y``)."""
    if not isinstance(n, Value) or n.known is None or n.known.size != 1:
        return None
    length = n.known.reshape(()).item()
    if not isinstance(length, Sym) or not any(is_data_symbol(s) for s in dim_symbols([length])):
        return None
    for op in b.graph.ops():
        tag = op.attrs.get("data_dim") if op.kind == "range" else None
        if tag and data_dim(tag) == length and all(
                v.known is not None and v.known.size == 1 and v.known.reshape(()).item() == k
                for v, k in ((op.inputs[0], 0), (op.inputs[2], 1))):
            return op.output
    return None


def _same_bound(a: Value, c: Value) -> bool:
    if a is c:
        return True
    return (a.known is not None and c.known is not None and a.type == c.type
            and bool(np.array_equal(a.known, c.known)))


def i64_const(b: Builder, value: int) -> Value:
    return scalar(b, value, DType.I64)


_FILL = {"zeros": 0, "ones": 1, "empty": 0}
FILLS = ("aten::zeros", "aten::ones", "aten::empty", "aten::full", "aten::empty_strided")
FILLS_LIKE = ("aten::zeros_like", "aten::ones_like", "aten::empty_like", "aten::full_like")
FILLS_NEW = ("aten::new_zeros", "aten::new_ones", "aten::new_empty", "aten::new_full", "aten::new_empty_strided")


def complex_fill(ctx: LoweringContext) -> Complex | None:
    """A factory asking for a complex dtype: the complex rule's fill of each part (the
    lowering sends a node there only when an argument is complex), else None."""
    found = filled_complex(ctx) if asks_complex(ctx) else None
    assert not isinstance(found, Value), "a complex dtype gives a complex tensor"
    return found


@RULES.rule(*FILLS)
def filled(ctx: LoweringContext) -> Value | Complex:
    """``empty`` is filled with zeros: any content is right for it."""
    if (z := complex_fill(ctx)) is not None:
        return z
    name = ctx.kind.removeprefix("aten::").removesuffix("_strided")
    value = ctx.raw("fill_value") if name == "full" else _FILL[name]
    dt = out_dtype(ctx, number_dtype(value) if name == "full" else DType.F32)
    return fill(ctx, ctx.shape_tensor("size"), value, dt)


@RULES.rule("aten::empty_permuted")
def empty_permuted(ctx: LoweringContext) -> Value:
    """torch.export's form of ``empty_like``: the memory order does not matter, the
    content is anything (zeros)."""
    return fill(ctx, ctx.shape_tensor("size"), 0, out_dtype(ctx, DType.F32))


@RULES.rule(*FILLS_LIKE)
def filled_like(ctx: LoweringContext) -> Value | Complex:
    if (z := complex_fill(ctx)) is not None:
        return z
    x = ctx.tensor(0)
    name = ctx.kind.removeprefix("aten::").removesuffix("_like")
    value = ctx.raw("fill_value") if name == "full" else _FILL[name]
    return fill(ctx, ctx.b.op("shape_of", x), value, out_dtype(ctx, x.type.dtype))


@RULES.rule(*FILLS_NEW)
def filled_new(ctx: LoweringContext) -> Value | Complex:
    """``x.new_*(size)``: the dtype defaults to x's."""
    if (z := complex_fill(ctx)) is not None:
        return z
    x = ctx.tensor(0)
    name = ctx.kind.removeprefix("aten::new_").removesuffix("_strided")
    value = ctx.raw("fill_value") if name == "full" else _FILL[name]
    return fill(ctx, ctx.shape_tensor("size"), value, out_dtype(ctx, x.type.dtype))


# -- ranges --------------------------------------------------------------------------

def arange_values(start: float, end: float, step: float, dtype: DType) -> np.ndarray:
    """torch.arange on numbers: length ceil((end - start) / step) in double, values
    start + i * step in double (or in integers for an integer dtype), then converted."""
    if step == 0:
        raise ValueError("arange step must be nonzero")
    if dtype is DType.I64:
        # PyTorch truncates every bound to int64 before it computes an int64 length.
        start, end, step = int(start), int(end), int(step)
        if step == 0:
            raise ValueError("arange step must be nonzero")
    n = max(0, math.ceil((end - start) / step))
    if not dtype.is_float:
        # Integer ranges step in integers: start and step are truncated first.
        vals: np.ndarray = int(start) + np.arange(n, dtype=np.int64) * int(step)
    else:
        vals = start + np.arange(n, dtype=np.float64) * step
    return vals.astype(dtype.numpy)


@RULES.rule("aten::arange")
def arange(ctx: LoweringContext) -> Value:
    if ctx.has("start"):
        start, end = ctx.raw("start"), ctx.raw("end")
        step = ctx.raw("step") if ctx.has("step") else 1
    else:
        start, end, step = 0, ctx.raw("end"), 1
    start, end, step = bounds = tuple(_folded_number(v) for v in (start, end, step))
    dt = out_dtype(ctx, number_dtype(*bounds))
    if not any(isinstance(v, Value) for v in bounds):
        try:
            vals = arange_values(start, end, step, dt)
        except ValueError as exc:
            raise ctx.unsupported(str(exc)) from None
        if vals.size == 0:
            raise ctx.unsupported("arange gives an empty tensor")
        return ctx.b.const(vals, dt)
    # A whole float constant beside computed integer bounds (XLNet's ``arange(klen, -qlen, -1.0)``)
    # gives the same length and values as its integer: the range is computed in integers.
    bounds = tuple(int(v) if isinstance(v, float) and v.is_integer() else v for v in bounds)
    if number_dtype(*bounds) is not DType.I64:
        raise ctx.unsupported("arange with floating-point bounds computed in the model")
    vals3 = [ctx.as_value(v, DType.I64) for v in bounds]
    vals3 = [v if v.rank == 0 else ctx.b.op("reshape", v, ctx.b.ints([])) for v in vals3]
    if any(v.known is None for v in vals3):  # bounds from tensor data (an input `n`)
        return ctx.b.cast(data_range(ctx.b, *vals3), dt)
    if start == 0 and step == 1 and (positions := data_positions(ctx.b, vals3[1])) is not None:
        return ctx.b.cast(positions, dt)  # to the length of a range made from data: that range
    return ctx.b.cast(ctx.b.op("range", *vals3), dt)


def _folded_number(v: Any) -> Any:
    """A bound computed from constants only (``arange(mask.sum().max())`` of a mask the
    model builds) as the number it is; anything else as given."""
    if isinstance(v, Value) and v.known is None and (k := fold(v)) is not None and k.size == 1:
        return k.reshape(()).item()
    return v


def index_range(b: Builder, n: Value) -> Value:
    """0, 1, …, n-1 (i64) for a 0-d i64 ``n`` (a size, or a value from tensor data)."""
    zero, one = scalar(b, 0, DType.I64), scalar(b, 1, DType.I64)
    if n.known is None:
        return data_range(b, zero, n, one)
    return data_positions(b, n) or b.op("range", zero, n, one)


@RULES.rule("aten::eye")
def eye(ctx: LoweringContext) -> Value:
    n = ctx.raw(0)
    m = ctx.raw("m") if ctx.has("m") else n
    dt = out_dtype(ctx, DType.F32)
    if isinstance(n, int) and isinstance(m, int):
        return ctx.b.const(np.eye(n, m, dtype=dt.numpy), dt)
    b = ctx.b
    sizes = [b.cast(ctx.as_value(v), DType.I64) for v in (n, m)]
    rows, cols = (index_range(b, v) for v in sizes)
    return b.cast(b.op("eq", b.op("unsqueeze", rows, axes=(1,)), cols), dt)


def spaced(start: float, end: float, steps: int, step_dtype: type) -> np.ndarray:
    """torch's symmetric linspace: start + i·step for the first half, end - (steps-1-i)·step
    for the second (so both ends are exact)."""
    idx = np.arange(steps)
    if steps == 1:
        return np.asarray([start], dtype=step_dtype)
    lo, hi = step_dtype(start), step_dtype(end)
    step = (hi - lo) / step_dtype(steps - 1)
    out = np.where(idx < steps // 2, lo + step * idx.astype(step_dtype),
                   hi - step * (steps - idx - 1).astype(step_dtype))
    return np.asarray(out, dtype=step_dtype)


def spaced_graph(ctx: LoweringContext, start: Any, end: Any, steps: int, dt: DType) -> Value:
    """The same formula built from graph values (start or end computed in the model)."""
    b = ctx.b
    idx_i = np.arange(steps)
    lo, hi = (ctx.as_value(v, dt) for v in (start, end))
    if steps == 1:
        return b.op("reshape", lo, b.ints([1]))
    idx = b.const(idx_i.astype(dt.numpy), dt)
    rev = b.const((steps - 1 - idx_i).astype(dt.numpy), dt)
    step = b.op("div", b.op("sub", hi, lo), scalar(b, steps - 1, dt))
    first = b.op("add", lo, b.op("mul", step, idx))
    second = b.op("sub", hi, b.op("mul", step, rev))
    return b.op("select", b.const(idx_i < steps // 2, DType.BOOL), first, second)


def _space(ctx: LoweringContext, log: bool) -> Value:
    start, end = ctx.raw("start"), ctx.raw("end")
    steps = ctx.int("steps")
    base = ctx.float("base") if log and ctx.has("base") else 10.0
    dt = out_dtype(ctx, DType.F32)
    if steps <= 0:
        raise ctx.unsupported(f"{ctx.kind} with {steps} steps gives an empty tensor")
    if not isinstance(start, Value) and not isinstance(end, Value):
        # The ends are first converted to the output dtype; linspace steps in that dtype
        # (double for integers), logspace in double.
        lo, hi = (np.asarray(v).astype(dt.numpy).astype(np.float64).item() for v in (start, end))
        step_dtype = np.float64 if log or not dt.is_float else dt.numpy.type
        vals = spaced(lo, hi, steps, step_dtype)
        if log:
            vals = np.power(np.float64(base), vals)
        return ctx.b.const(vals.astype(dt.numpy), dt)
    compute = dt if dt.is_float else DType.F32
    vals_v = spaced_graph(ctx, start, end, steps, compute)
    if log:
        vals_v = ctx.b.op("pow", scalar(ctx.b, base, compute), vals_v)
    return ctx.b.cast(vals_v, dt)


@RULES.rule("aten::linspace")
def linspace(ctx: LoweringContext) -> Value:
    return _space(ctx, log=False)


@RULES.rule("aten::logspace")
def logspace(ctx: LoweringContext) -> Value:
    return _space(ctx, log=True)


@RULES.rule("aten::meshgrid")
def meshgrid(ctx: LoweringContext) -> list[Value]:
    raw: Any = ctx.raw(0)
    items = [ctx.as_value(v) for v in raw]
    indexing = ctx.const(1) if ctx.n_inputs > 1 and not ctx.is_none(1) else "ij"
    b = ctx.b
    sizes = [v.type.shape[0] if v.rank else 1 for v in items]
    order = list(range(len(items)))
    if indexing == "xy" and len(items) >= 2:
        order[0], order[1] = 1, 0
    shape = [sizes[i] for i in order]
    outs = []
    for k, v in enumerate(items):
        pos = order.index(k)
        dims: list[Dim] = [1] * len(items)
        dims[pos] = sizes[k]
        outs.append(b.op("expand", b.op("reshape", v, b.ints(dims)), b.ints(shape)))
    return outs


@RULES.rule("aten::triu_indices", "aten::tril_indices")
def tri_indices(ctx: LoweringContext) -> Value:
    rows, cols = ctx.int(0), ctx.int(1)
    offset = ctx.int(2) if ctx.n_inputs > 2 else 0
    fn = np.triu_indices if "triu" in ctx.kind else np.tril_indices
    idx = np.stack(fn(rows, offset, cols)).astype(np.int64)
    return ctx.b.const(idx, DType.I64)


# -- complex filled tensors (COMPLEX_FILLS, found by complex.complex_rule) ---------------


def asked_dtype(ctx: LoweringContext) -> Any:
    """The ``dtype`` argument as a torch.dtype (TorchScript gives its code), or None."""
    import torch

    from t2n.frontend.dtypes import SCALAR_TYPE_CODES

    if not ctx.has("dtype") or ctx.is_none("dtype"):
        return None
    dtype = ctx.const("dtype")
    dtype = SCALAR_TYPE_CODES.get(dtype) if isinstance(dtype, int) else dtype  # TorchScript's code
    return dtype if isinstance(dtype, torch.dtype) else None


def asks_complex(ctx: LoweringContext) -> bool:
    """Whether a factory asks for a complex dtype (``zeros(n, dtype=torch.complex64)``,
    which torch.export records as a ``full``): the real rules send it here."""
    dtype = asked_dtype(ctx)
    return dtype is not None and dtype.is_complex


@COMPLEX_FILLS.rule(*FILLS, *FILLS_LIKE, *FILLS_NEW)
def filled_complex(ctx: LoweringContext) -> Complex | Value:
    """The real rule's ``fill`` of each part: a complex fill value, a complex dtype, or
    the shape (``*_like``) or dtype (``new_*``) of a complex tensor; a real dtype asked
    keeps the real part, as PyTorch does."""
    import torch

    from t2n.frontend.dtypes import to_ir

    name = ctx.kind.removeprefix("aten::").removeprefix("new_").removesuffix("_like").removesuffix("_strided")
    value = ctx.raw("fill_value") if name == "full" else _FILL[name]
    like = ctx.raw(0) if ctx.kind in FILLS_LIKE or ctx.kind in FILLS_NEW else None
    b = ctx.b
    if ctx.kind in FILLS_LIKE:
        shape = complex_shape(ctx.b, like) if isinstance(like, Complex) else b.op("shape_of", ctx.as_value(like))
    else:
        shape = ctx.shape_tensor("size")
    dtype = asked_dtype(ctx)
    if dtype is not None and not dtype.is_complex:
        return fill(ctx, shape, value.real if isinstance(value, complex) else value, to_ir(dtype))
    dt = DType.F64 if dtype == torch.complex128 else parts_dtype([like, value]) if dtype is None else DType.F32
    return fill_parts(ctx, shape, value, dt)


def fill_parts(ctx: LoweringContext, shape: Value, value: Any, dtype: DType) -> Complex:
    """The real ``fill`` of each part of ``value`` (a number, a real or a complex 0-d tensor)."""
    b = ctx.b
    if isinstance(value, Complex):
        return from_parts(b, fill(ctx, shape, part(b, value, 0), dtype), fill(ctx, shape, part(b, value, 1), dtype))
    re, im = (value.real, value.imag) if isinstance(value, complex) else (value, 0.0)
    return from_parts(b, fill(ctx, shape, re, dtype), fill(ctx, shape, im, dtype))


@COMPLEX_FILLS.rule("aten::scalar_tensor")
def complex_scalar(ctx: LoweringContext) -> Complex:
    """A Python complex number as a 0-d tensor (torch.export's form of the number in
    ``where(c, z, 2 - 1j)``)."""
    import torch

    x = ctx.raw(0)
    if not isinstance(x, complex):
        raise ctx.unsupported("scalar_tensor of a complex value that is not a Python number")
    return constant(ctx.b, x, DType.F64 if asked_dtype(ctx) == torch.complex128 else DType.F32)


@COMPLEX_FILLS.rule("aten::fill_", "aten::fill", "aten::zero_", "aten::zero")
def fill_complex(ctx: LoweringContext) -> Complex:
    """The real ``fill`` of each part in the tensor's shape."""
    z = complex_arg(ctx, 0)
    value = 0 if "zero" in ctx.kind else ctx.raw(1)
    return fill_parts(ctx, complex_shape(ctx.b, z), value, z.dtype)
