"""Ops on complex tensors (:class:`~t2n.frontend.complex_tensors.Complex` pairs).

The lowering driver sends a node here instead of its usual rule when one of its
arguments is complex. Arithmetic becomes real arithmetic on the parts
(``(a + ib)(c + id) = (ac - bd) + i(ad + bc)``); ``abs`` and ``angle`` are
``sqrt(re² + im²)`` and ``atan2(im, re)``; ``view_as_real``, ``real`` and ``imag``
hand the parts back to real code. Shape and movement ops act on the pair with axes
normalized against the complex tensor's own rank, the pair's last axis left in place.
An op on a complex tensor that is not here is reported by name.
"""

from __future__ import annotations

import builtins

import numpy as np

from t2n.frontend.complex_tensors import (
    Complex,
    complex_arg,
    conjugate,
    constant,
    from_parts,
    of_real,
    part,
)
from t2n.frontend.context import LoweringContext, norm_axis
from t2n.frontend.helpers import dim_value
from t2n.frontend.lowering.shape import concat_shape, shape_part, slice_arguments, slice_axis
from t2n.frontend.registry import RuleInfo, RuleSet
from t2n.ir import Builder, DType, Value

COMPLEX = RuleSet("complex")


def complex_rule(kind: str) -> RuleInfo | None:
    """The rule for ``kind`` when an argument is complex (None: not supported)."""
    from t2n.frontend.lowering.complex_index import COMPLEX_INDEX
    from t2n.frontend.lowering.creation import COMPLEX_FILLS
    from t2n.frontend.lowering.spectral import COMPLEX_RULES
    from t2n.frontend.lowering.spectral_nd import COMPLEX_RULES as COMPLEX_ND_RULES

    for rules in (COMPLEX, COMPLEX_INDEX, COMPLEX_FILLS, COMPLEX_RULES, COMPLEX_ND_RULES):
        if kind in rules.rules:
            return rules.rules[kind]
    return None


def complex_problem(kind: str) -> str:
    return (f"{kind} on a complex tensor: NNEF has no complex type, and t2n follows complex "
            "tensors through Fourier transforms, arithmetic (+ - * /, conj), abs, angle, real, "
            "imag, view_as_real, shape ops, indexing and filled tensors only. What to do: take "
            "torch.view_as_real(z) (or z.abs(), z.real...) before this op")




def _operand(ctx: LoweringContext, key: builtins.int | str, dtype: DType) -> Complex | Value:
    """A complex argument as is; a real one (tensor or number) as a real value; a Python
    complex number as a complex constant."""
    x = ctx.raw(key)
    if isinstance(x, Complex):
        return x if x.dtype is dtype else Complex(ctx.b.cast(x.pair, dtype))  # complex64 with complex128
    if isinstance(x, complex):
        return constant(ctx.b, x, dtype)
    return ctx.as_value(x, dtype)


def _lifted(b: Builder, v: Value) -> Value:
    """A real operand broadcast against a pair: a unit axis where the pair has (re, im)."""
    return b.op("unsqueeze", v, axes=(v.rank,))


def _dtype(ctx: LoweringContext) -> DType:
    """The parts' dtype of a binary op's result: f64 when either complex operand is
    complex128 (PyTorch's promotion); a real tensor and a Python complex number
    (``1j * x``) give complex128 from float64 only."""
    xs = (ctx.raw(0), ctx.raw(1))
    dtypes = [x.dtype for x in xs if isinstance(x, Complex)] or [x.type.dtype for x in xs if isinstance(x, Value)]
    return DType.F64 if DType.F64 in dtypes else DType.F32


# -- back to real --------------------------------------------------------------------

@COMPLEX.rule("aten::view_as_real")
def view_as_real(ctx: LoweringContext) -> Value:
    return complex_arg(ctx, 0).pair


@COMPLEX.rule("aten::real")
def real(ctx: LoweringContext) -> Value:
    return part(ctx.b, complex_arg(ctx, 0), 0)


@COMPLEX.rule("aten::imag")
def imag(ctx: LoweringContext) -> Value:
    return part(ctx.b, complex_arg(ctx, 0), 1)


@COMPLEX.rule("aten::abs")
def magnitude(ctx: LoweringContext) -> Value:
    z = complex_arg(ctx, 0)
    b = ctx.b
    squares = b.op("sum_reduce", b.op("mul", z.pair, z.pair), axes=(z.rank,), keepdims=False)
    return b.op("sqrt", squares)


@COMPLEX.rule("aten::angle")
def angle(ctx: LoweringContext) -> Value:
    z = complex_arg(ctx, 0)
    return ctx.b.op("atan2", part(ctx.b, z, 1), part(ctx.b, z, 0))


# -- arithmetic ----------------------------------------------------------------------

@COMPLEX.rule("aten::conj", "aten::conj_physical", "aten::_conj", "aten::_conj_physical")
def conj(ctx: LoweringContext) -> Complex:
    return conjugate(ctx.b, complex_arg(ctx, 0))


@COMPLEX.rule("aten::resolve_conj", "aten::resolve_neg", "aten::contiguous", "aten::clone",
              "aten::detach", "aten::alias", "aten::lift_fresh")
def same(ctx: LoweringContext) -> Complex:
    return complex_arg(ctx, 0)


@COMPLEX.rule("aten::_assert_tensor_metadata")
def metadata_check(ctx: LoweringContext) -> None:
    """torch.export's check of a tensor's dtype and device: nothing to compute."""
    return None


@COMPLEX.rule("aten::to", "aten::_to_copy")
def to(ctx: LoweringContext) -> Complex | Value:
    """A move (Llama 4's ``freqs_cis.to(x.device)``) keeps the pair; another complex dtype
    casts both parts; a real dtype keeps the real part, as PyTorch does."""
    import torch

    from t2n.frontend.lowering.creation import asked_dtype

    z = complex_arg(ctx, 0)
    dtype = asked_dtype(ctx)
    if dtype is None:
        return z
    if dtype.is_complex:
        return Complex(ctx.b.cast(z.pair, DType.F64 if dtype == torch.complex128 else DType.F32))
    from t2n.frontend.dtypes import to_ir

    return ctx.b.cast(part(ctx.b, z, 0), to_ir(dtype))


@COMPLEX.rule("aten::neg", "aten::_neg_view")
def neg(ctx: LoweringContext) -> Complex:
    return Complex(ctx.b.op("neg", complex_arg(ctx, 0).pair))


@COMPLEX.rule("aten::add", "aten::sub")
def add_sub(ctx: LoweringContext) -> Complex:
    b, dt = ctx.b, _dtype(ctx)
    x, y = _operand(ctx, 0, dt), _operand(ctx, 1, dt)
    alpha = ctx.raw(2) if ctx.n_inputs > 2 and not ctx.is_none(2) else 1
    if alpha != 1:
        if not isinstance(alpha, (int, float)):
            raise ctx.unsupported("alpha must be a real number")
        y = Complex(b.op("mul", y.pair, b.const(np.asarray(alpha, dt.numpy), dt))) if isinstance(y, Complex) \
            else b.op("mul", y, b.const(np.asarray(alpha, dt.numpy), dt))
    op = "add" if ctx.kind == "aten::add" else "sub"
    if isinstance(x, Complex) and isinstance(y, Complex):
        return Complex(b.op(op, x.pair, y.pair))
    if isinstance(x, Complex):
        assert isinstance(y, Value)
        return from_parts(b, b.op(op, part(b, x, 0), y), part(b, x, 1))
    assert isinstance(y, Complex)
    im = part(b, y, 1)
    return from_parts(b, b.op(op, x, part(b, y, 0)), im if op == "add" else b.op("neg", im))


def _product(b: Builder, x: Complex, y: Complex) -> Complex:
    a, c = part(b, x, 0), part(b, y, 0)
    bi, di = part(b, x, 1), part(b, y, 1)
    re = b.op("sub", b.op("mul", a, c), b.op("mul", bi, di))
    im = b.op("add", b.op("mul", a, di), b.op("mul", bi, c))
    return from_parts(b, re, im)


@COMPLEX.rule("aten::mul")
def mul(ctx: LoweringContext) -> Complex:
    b, dt = ctx.b, _dtype(ctx)
    x, y = _operand(ctx, 0, dt), _operand(ctx, 1, dt)
    if isinstance(x, Complex) and isinstance(y, Complex):
        return _product(b, x, y)
    z, r = (x, y) if isinstance(x, Complex) else (y, x)
    assert isinstance(z, Complex) and isinstance(r, Value)
    return Complex(b.op("mul", z.pair, _lifted(b, r)))


@COMPLEX.rule("aten::div")
def div(ctx: LoweringContext) -> Complex:
    b, dt = ctx.b, _dtype(ctx)
    if ctx.n_inputs > 2 and not ctx.is_none(2):
        raise ctx.unsupported("rounding division of complex tensors")
    x, y = _operand(ctx, 0, dt), _operand(ctx, 1, dt)
    if isinstance(y, Value):
        assert isinstance(x, Complex)
        return Complex(b.op("div", x.pair, _lifted(b, y)))
    num = _product(b, x if isinstance(x, Complex) else of_real(b, x), conjugate(b, y))
    den = b.op("sum_reduce", b.op("mul", y.pair, y.pair), axes=(y.rank,), keepdims=False)
    return Complex(b.op("div", num.pair, _lifted(b, den)))


@COMPLEX.rule("aten::sum", "aten::mean")
def reduce(ctx: LoweringContext) -> Complex:
    z = complex_arg(ctx, 0)
    if ctx.has("dim") and not ctx.is_none("dim"):
        axes = tuple(sorted({norm_axis(a, z.rank) for a in ctx.ints("dim")}))
        keep = ctx.bool("keepdim") if ctx.has("keepdim") else False
    else:
        axes, keep = tuple(range(z.rank)), False
    op = "sum_reduce" if ctx.kind == "aten::sum" else "mean_reduce"
    return Complex(ctx.b.op(op, z.pair, axes=axes, keepdims=keep))


# -- shapes --------------------------------------------------------------------------

@COMPLEX.rule("aten::size")
def size(ctx: LoweringContext) -> object:
    z = complex_arg(ctx, 0)
    static = ctx.lowering.static_sizes
    axes = [norm_axis(ctx.int(1), z.rank)] if ctx.n_inputs > 1 and not ctx.is_none(1) else list(range(z.rank))
    dims = [d if static and isinstance(d, int) else dim_value(ctx.b, z.pair, a)
            for a, d in ((a, z.shape[a]) for a in axes)]
    return dims[0] if ctx.n_inputs > 1 and not ctx.is_none(1) else dims


@COMPLEX.rule("aten::dim")
def dim(ctx: LoweringContext) -> int:
    return complex_arg(ctx, 0).rank


@COMPLEX.rule("aten::transpose")
def transpose(ctx: LoweringContext) -> Complex:
    z = complex_arg(ctx, 0)
    a, c = norm_axis(ctx.int(1), z.rank), norm_axis(ctx.int(2), z.rank)
    perm = list(range(z.rank + 1))
    perm[a], perm[c] = perm[c], perm[a]
    return Complex(ctx.b.op("transpose", z.pair, perm=tuple(perm)))


@COMPLEX.rule("aten::permute")
def permute(ctx: LoweringContext) -> Complex:
    z = complex_arg(ctx, 0)
    perm = [norm_axis(d, z.rank) for d in ctx.ints(1)] + [z.rank]
    return Complex(ctx.b.op("transpose", z.pair, perm=tuple(perm)))


@COMPLEX.rule("aten::unsqueeze")
def unsqueeze(ctx: LoweringContext) -> Complex:
    z = complex_arg(ctx, 0)
    return Complex(ctx.b.op("unsqueeze", z.pair, axes=(norm_axis(ctx.int(1), z.rank + 1),)))


@COMPLEX.rule("aten::squeeze")
def squeeze(ctx: LoweringContext) -> Complex:
    z = complex_arg(ctx, 0)
    if ctx.n_inputs > 1 and not ctx.is_none(1):
        axes = [norm_axis(d, z.rank) for d in ctx.ints(1)]
    else:
        axes = list(range(z.rank))
    axes = sorted({a for a in axes if z.shape[a] == 1})
    return Complex(ctx.b.op("squeeze", z.pair, axes=tuple(axes))) if axes else z


@COMPLEX.rule("aten::reshape", "aten::view")
def reshape(ctx: LoweringContext) -> Complex:
    z = complex_arg(ctx, 0)
    target = ctx.b.op("concat", ctx.shape_tensor(1), ctx.b.ints([2]), axis=0)
    return Complex(ctx.b.op("reshape", z.pair, target))


@COMPLEX.rule("aten::expand", "aten::broadcast_to")
def expand(ctx: LoweringContext) -> Complex:
    """The pair broadcast to the sizes, its (re, im) axis kept (Qwen-Image's rotary table
    over the batch)."""
    z = complex_arg(ctx, 0)
    return Complex(ctx.b.op("expand", z.pair, ctx.b.op("concat", ctx.shape_tensor(1), ctx.b.ints([2]), axis=0)))


@COMPLEX.rule("aten::repeat")
def repeat(ctx: LoweringContext) -> Complex:
    from t2n.frontend.lowering.rearrange import tile

    z = complex_arg(ctx, 0)
    reps = ctx.shape_tensor(1)
    n = reps.type.shape[0]
    if not isinstance(n, builtins.int) or n < z.rank:
        raise ctx.unsupported("repeat: fewer repeats than tensor dimensions")
    return Complex(tile(ctx.b, z.pair, ctx.b.op("concat", reps, ctx.b.ints([1]), axis=0), n + 1))


@COMPLEX.rule("aten::flatten")
def flatten(ctx: LoweringContext) -> Complex:
    z = complex_arg(ctx, 0)
    b = ctx.b
    s = norm_axis(ctx.int(1), z.rank) if ctx.n_inputs > 1 else 0
    e = norm_axis(ctx.int(2), z.rank) if ctx.n_inputs > 2 else z.rank - 1
    if s >= e:
        return z
    target = concat_shape(b, [shape_part(b, z.pair, 0, s), [-1], shape_part(b, z.pair, e + 1, z.rank + 1)])
    return Complex(b.op("reshape", z.pair, target))


@COMPLEX.rule("aten::slice")
def slice_(ctx: LoweringContext) -> Complex:
    z = complex_arg(ctx, 0)
    sliced = slice_arguments(ctx, z.rank)
    if sliced is None:
        return z
    axis, start, end, step = sliced
    return Complex(ctx.b.op("slice", z.pair, start, end, axes=(axis,), steps=(step,)))


@COMPLEX.rule("aten::split", "aten::unsafe_split", "aten::split_with_sizes", "aten::unsafe_split_with_sizes")
def split(ctx: LoweringContext) -> list[Complex]:
    """Pieces of a static axis (Qwen-Image's rotary table split per position axis)."""
    from t2n.frontend.lowering.split import cut, split_starts

    z = complex_arg(ctx, 0)
    axis = norm_axis(ctx.int(2), z.rank) if ctx.n_inputs > 2 else 0
    n = z.shape[axis]
    if not isinstance(n, builtins.int):
        raise ctx.unsupported("split of a complex tensor along a dynamic axis")
    return [Complex(p) for p in cut(ctx.b, z.pair, axis, split_starts(ctx, n))]


@COMPLEX.rule("aten::chunk", "aten::unsafe_chunk")
def chunk(ctx: LoweringContext) -> list[Complex]:
    """The real rule's pieces of the pair, the axis counted on the complex tensor
    (NucleusMoE's rotary table chunked per position axis)."""
    from t2n.frontend.lowering.split import chunk_pieces

    z = complex_arg(ctx, 0)
    axis = norm_axis(ctx.int(2), z.rank) if ctx.n_inputs > 2 else 0
    return [Complex(p) for p in chunk_pieces(ctx, z.pair, ctx.int(1), axis)]


@COMPLEX.rule("aten::select")
def select(ctx: LoweringContext) -> Complex:
    z = complex_arg(ctx, 0)
    axis = norm_axis(ctx.int(1), z.rank)
    i = ctx.int(2)
    piece = slice_axis(ctx.b, z.pair, axis, i, None if i == -1 else i + 1)
    return Complex(ctx.b.op("squeeze", piece, axes=(axis,)))


@COMPLEX.rule("aten::narrow")
def narrow(ctx: LoweringContext) -> Complex:
    z = complex_arg(ctx, 0)
    axis = norm_axis(ctx.int(1), z.rank)
    start, length = ctx.int(2), ctx.int(3)
    return Complex(slice_axis(ctx.b, z.pair, axis, start, start + length))


def _pieces(ctx: LoweringContext) -> list[Complex]:
    items = ctx.raw(0)
    if not isinstance(items, (list, tuple)):
        raise ctx.unsupported("joining a list of complex tensors computed at run time")
    dt = next(v.dtype for v in items if isinstance(v, Complex))
    return [v if isinstance(v, Complex) else of_real(ctx.b, ctx.as_value(v, dt)) for v in items]


@COMPLEX.rule("aten::cat")
def cat(ctx: LoweringContext) -> Complex:
    pieces = _pieces(ctx)
    axis = norm_axis(ctx.int(1), pieces[0].rank) if ctx.n_inputs > 1 else 0
    if len(pieces) == 1:
        return pieces[0]
    return Complex(ctx.b.op("concat", *[p.pair for p in pieces], axis=axis))


@COMPLEX.rule("aten::stack")
def stack(ctx: LoweringContext) -> Complex:
    pieces = _pieces(ctx)
    axis = norm_axis(ctx.int(1), pieces[0].rank + 1) if ctx.n_inputs > 1 else 0
    lifted = [ctx.b.op("unsqueeze", p.pair, axes=(axis,)) for p in pieces]
    return Complex(lifted[0] if len(lifted) == 1 else ctx.b.op("concat", *lifted, axis=axis))


@COMPLEX.rule("aten::flip")
def flip(ctx: LoweringContext) -> Complex:
    z = complex_arg(ctx, 0)
    axes = tuple(sorted({norm_axis(a, z.rank) for a in ctx.ints(1)}))
    return Complex(ctx.b.op("reverse", z.pair, axes=axes)) if axes else z


@COMPLEX.rule("aten::constant_pad_nd")
def constant_pad(ctx: LoweringContext) -> Complex:
    """Zero padding (torch.export's form of a transform length above the signal's):
    the pair padded on the same axes, its (real, imaginary) axis untouched; negative
    widths (cuts) are refused."""
    z = complex_arg(ctx, 0)
    value = ctx.optional("value") if ctx.has("value") else None
    flat = ctx.ints(1)
    if value not in (None, 0, 0.0) or any(w < 0 for w in flat) or len(flat) > 2 * z.rank:
        raise ctx.unsupported("padding a complex tensor with a value other than zero, or cutting it")
    pads = [(0, 0)] * (z.rank + 1)
    for i in range(len(flat) // 2):  # PyTorch lists the last axis first
        pads[z.rank - 1 - i] = (flat[2 * i], flat[2 * i + 1])
    return Complex(ctx.b.op("pad", z.pair, pads=tuple(pads), mode="constant", value=0.0))


@COMPLEX.rule("aten::pad")
def pad(ctx: LoweringContext) -> Complex:
    """``F.pad`` of a complex tensor as both frontends record it (HDemucs pads its
    spectrogram before the inverse STFT): zero padding only, as ``constant_pad_nd``."""
    mode = str(ctx.const("mode")) if ctx.has("mode") else "constant"
    if mode != "constant":
        raise ctx.unsupported(f"{mode} padding of a complex tensor")
    return constant_pad(ctx)
