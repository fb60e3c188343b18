"""``torch.fft`` over one axis or several, and the primitives torch.export leaves.

``torch.fft.fft/ifft/rfft/irfft`` and ``fftn/ifftn/fft2/ifft2/rfftn/rfft2/irfftn/irfft2``
(what a TorchScript trace records, e.g. FNet's mixing layer) and
``aten::_fft_c2c/_fft_r2c/_fft_c2r`` (what ``torch.export`` decomposes every ``torch.fft``
call into) lower to one IR ``fft`` per axis: a transform over several axes is the 1-D
transform applied along each of them in turn; a 1-D call is the one-axis case. The normalization is one scale over the product of the signal lengths (PyTorch's
``norm`` string, or the primitives' enum: 0 none, 1 by the root of n, 2 by n). A real
forward transform keeps the ``n // 2 + 1`` first bins of its last axis; a real inverse
runs the complex inverse on the other axes, then the c2r transform on the last.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from t2n.frontend.complex_tensors import Complex, scaled
from t2n.frontend.context import LoweringContext, norm_axis
from t2n.frontend.lowering.shape import slice_axis
from t2n.frontend.lowering.spectral import (
    complex_arg,
    inverse_real,
    norm_factor,
    resized,
    static_length,
    transform,
)
from t2n.frontend.registry import RuleSet
from t2n.ir import Value

RULES = RuleSet("spectral n-d")
COMPLEX_RULES = RuleSet("spectral n-d/complex")

_ENUM_SCALE = {0: "none", 1: "root", 2: "n"}

_ONE_AXIS = frozenset({"aten::fft_fft", "aten::fft_ifft", "aten::fft_rfft", "aten::fft_irfft"})
"""The calls over one axis: ``(x, n, dim=-1, norm)``, not ``(x, s, dim, norm)``."""


def _axes_and_sizes(ctx: LoweringContext, z: Complex, default_axes: Sequence[int] | None) -> tuple[list[int], list[int]]:
    """The axes of ``fftn(x, s, dim)`` and their transform lengths, as PyTorch resolves
    them: ``dim`` None takes the last ``len(s)`` axes (every axis without ``s``)."""
    dims: Sequence[int] | None
    if ctx.kind in _ONE_AXIS:  # (x, n, dim=-1, norm)
        sizes = None if ctx.is_none(1) else [ctx.int(1)]
        dims = [-1 if ctx.is_none(2) else ctx.int(2)]
    else:
        sizes = None if ctx.is_none(1) else ctx.ints(1)
        dims = default_axes if ctx.is_none(2) else ctx.ints(2)
    if dims is not None:
        axes = [norm_axis(a, z.rank) for a in dims]
    else:
        axes = list(range(z.rank - len(sizes), z.rank)) if sizes is not None else list(range(z.rank))
    if sizes is not None and len(sizes) != len(axes):
        raise ctx.unsupported(f"{ctx.kind} with {len(sizes)} sizes for {len(axes)} axes")
    if sizes is None:
        sizes = [static_length(ctx, z, a) for a in axes]
    return axes, [int(n) for n in sizes]


def _norm(ctx: LoweringContext) -> str | None:
    return None if ctx.is_none(3) else str(ctx.const(3))


def _along(ctx: LoweringContext, z: Complex, axes: Sequence[int], sizes: Sequence[int], inverse: bool) -> Complex:
    """``z`` cut or padded to ``sizes`` and transformed along each of ``axes``."""
    for axis, n in zip(axes, sizes, strict=True):
        z = transform(ctx, resized(ctx.b, z, axis, static_length(ctx, z, axis), n), axis, inverse)
    return z


def _enum_factor(normalization: int, n: int) -> float:
    mode = _ENUM_SCALE.get(normalization)
    if mode is None:
        raise ValueError(f"unknown FFT normalization {normalization}")
    return {"none": 1.0, "root": 1.0 / math.sqrt(n), "n": 1.0 / n}[mode]


def _fftn(ctx: LoweringContext, default_axes: Sequence[int] | None) -> Complex:
    inverse = "ifft" in ctx.kind
    z = complex_arg(ctx, 0)
    axes, sizes = _axes_and_sizes(ctx, z, default_axes)
    return scaled(ctx.b, _along(ctx, z, axes, sizes, inverse), norm_factor(_norm(ctx), math.prod(sizes), inverse))


@RULES.rule("aten::fft_fft", "aten::fft_ifft", "aten::fft_fftn", "aten::fft_ifftn")
@COMPLEX_RULES.rule("aten::fft_fft", "aten::fft_ifft", "aten::fft_fftn", "aten::fft_ifftn")
def fftn(ctx: LoweringContext) -> Complex:
    return _fftn(ctx, None)


@RULES.rule("aten::fft_fft2", "aten::fft_ifft2")
@COMPLEX_RULES.rule("aten::fft_fft2", "aten::fft_ifft2")
def fft2(ctx: LoweringContext) -> Complex:
    return _fftn(ctx, (-2, -1))


def _rfftn(ctx: LoweringContext, default_axes: Sequence[int] | None) -> Complex:
    z = complex_arg(ctx, 0)
    axes, sizes = _axes_and_sizes(ctx, z, default_axes)
    full = scaled(ctx.b, _along(ctx, z, axes, sizes, False), norm_factor(_norm(ctx), math.prod(sizes), False))
    return Complex(slice_axis(ctx.b, full.pair, axes[-1], 0, sizes[-1] // 2 + 1))


@RULES.rule("aten::fft_rfft", "aten::fft_rfftn")
def rfftn(ctx: LoweringContext) -> Complex:
    return _rfftn(ctx, None)


@RULES.rule("aten::fft_rfft2")
def rfft2(ctx: LoweringContext) -> Complex:
    return _rfftn(ctx, (-2, -1))


def _irfftn(ctx: LoweringContext, default_axes: Sequence[int] | None) -> Value:
    z = complex_arg(ctx, 0)
    axes, sizes = _axes_and_sizes(ctx, z, default_axes)
    if ctx.is_none(1):  # the last axis holds n // 2 + 1 bins of n = 2 * (bins - 1) samples
        sizes[-1] = 2 * (sizes[-1] - 1)
    if sizes[-1] < 1:
        raise ctx.unsupported(f"{ctx.kind} gives no samples along axis {axes[-1]}; pass its length")
    factor = norm_factor(_norm(ctx), math.prod(sizes), True)
    z = _along(ctx, z, axes[:-1], sizes[:-1], True)
    return inverse_real(ctx, z, axes[-1], sizes[-1], factor)


@RULES.rule("aten::fft_irfft", "aten::fft_irfftn")
@COMPLEX_RULES.rule("aten::fft_irfft", "aten::fft_irfftn")
def irfftn(ctx: LoweringContext) -> Value:
    return _irfftn(ctx, None)


@RULES.rule("aten::fft_irfft2")
@COMPLEX_RULES.rule("aten::fft_irfft2")
def irfft2(ctx: LoweringContext) -> Value:
    return _irfftn(ctx, (-2, -1))


def _primitive_axes(ctx: LoweringContext, z: Complex) -> list[int]:
    return [norm_axis(a, z.rank) for a in ctx.ints(1)]


@RULES.rule("aten::_fft_c2c")
@COMPLEX_RULES.rule("aten::_fft_c2c")
def fft_c2c(ctx: LoweringContext) -> Complex:
    """``_fft_c2c(x, dim, normalization, forward)``."""
    z = complex_arg(ctx, 0)
    axes = _primitive_axes(ctx, z)
    sizes = [static_length(ctx, z, a) for a in axes]
    out = _along(ctx, z, axes, sizes, not ctx.bool(3))
    return scaled(ctx.b, out, _enum_factor(ctx.int(2), math.prod(sizes)))


@RULES.rule("aten::_fft_r2c")
def fft_r2c(ctx: LoweringContext) -> Complex:
    """``_fft_r2c(x, dim, normalization, onesided)``: a real signal's spectrum."""
    z = complex_arg(ctx, 0)
    axes = _primitive_axes(ctx, z)
    sizes = [static_length(ctx, z, a) for a in axes]
    out = scaled(ctx.b, _along(ctx, z, axes, sizes, False), _enum_factor(ctx.int(2), math.prod(sizes)))
    if ctx.bool(3):
        out = Complex(slice_axis(ctx.b, out.pair, axes[-1], 0, sizes[-1] // 2 + 1))
    return out


@RULES.rule("aten::_fft_c2r")
@COMPLEX_RULES.rule("aten::_fft_c2r")
def fft_c2r(ctx: LoweringContext) -> Value:
    """``_fft_c2r(x, dim, normalization, last_dim_size)``: the real signal of a one-sided
    spectrum (always the inverse transform)."""
    z = complex_arg(ctx, 0)
    axes = _primitive_axes(ctx, z)
    sizes = [static_length(ctx, z, a) for a in axes[:-1]] + [ctx.int(3)]
    factor = _enum_factor(ctx.int(2), math.prod(sizes))
    return inverse_real(ctx, _along(ctx, z, axes[:-1], sizes[:-1], True), axes[-1], sizes[-1], factor)
