"""Fourier transforms and the window functions audio front-ends use.

``torch.fft.fft/ifft/rfft/irfft`` and ``torch.stft`` lower to the IR's ``fft`` and
``stft`` (tract's ``tract_core_fft``/``tract_core_stft``), on complex tensors held as
:class:`~t2n.frontend.complex_tensors.Complex` pairs. tract's transforms are not
normalized; PyTorch's ``norm`` modes become a scale. A real FFT is the full transform
of the signal with zero imaginary parts, cut to its ``n // 2 + 1`` first bins; an
inverse real FFT rebuilds the Hermitian half it was not given (``X[n-k] =
conj(X[k])``) and keeps the real part. ``torch.stft`` (its centre padding is traced as
a separate ``pad``) frames along the last axis, takes the one-sided half, and puts
frequencies before frames as PyTorch does. Transform lengths and axes must be static.
``RULES`` take real inputs; ``COMPLEX_RULES`` the same ops on complex inputs (the
lowering driver picks them when an argument is complex).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from t2n.frontend.complex_tensors import Complex, conjugate, from_parts, of_real, part, scaled
from t2n.frontend.context import LoweringContext, norm_axis
from t2n.frontend.lowering.shape import slice_axis
from t2n.frontend.registry import RuleSet
from t2n.ir import Builder, DType, Value

RULES = RuleSet("spectral")
COMPLEX_RULES = RuleSet("spectral/complex")


def _complex_arg(ctx: LoweringContext, key: int | str) -> Complex:
    x = ctx.raw(key)
    if isinstance(x, Complex):
        return x
    v = ctx.tensor(key)
    if not v.type.dtype.is_float:
        v = ctx.b.cast(v, DType.F32)
    return of_real(ctx.b, v)


def _static_length(ctx: LoweringContext, z: Complex, axis: int) -> int:
    n = z.shape[axis]
    if not isinstance(n, int):
        raise ctx.unsupported(f"a Fourier transform over axis {axis}, whose length is symbolic ({n}): "
                              "tract's FFT needs a fixed length here; keep that axis static")
    return n


def _resized(b: Builder, z: Complex, axis: int, length: int, n: int) -> Complex:
    """``z`` cut or zero-padded to ``n`` along ``axis`` (PyTorch's ``n`` argument)."""
    if n == length:
        return z
    if n < length:
        return Complex(slice_axis(b, z.pair, axis, 0, n))
    pads = [(0, 0)] * (z.rank + 1)
    pads[axis] = (0, n - length)
    return Complex(b.op("pad", z.pair, pads=tuple(pads), mode="constant", value=0.0))


def _norm_factor(norm: str | None, n: int, inverse: bool) -> float:
    """The scale PyTorch's ``norm`` puts on an unnormalized transform of length ``n``."""
    mode = norm or "backward"
    if mode == "ortho":
        return 1.0 / math.sqrt(n)
    if mode == ("backward" if inverse else "forward"):
        return 1.0 / n
    return 1.0


def _transform(ctx: LoweringContext, z: Complex, axis: int, inverse: bool) -> Complex:
    return Complex(ctx.b.op("fft", z.pair, axis=axis, inverse=inverse))


def _fft_args(ctx: LoweringContext) -> tuple[Complex, int, int, str | None]:
    z = _complex_arg(ctx, 0)
    axis = norm_axis(ctx.int(2), z.rank) if not ctx.is_none(2) else z.rank - 1
    length = _static_length(ctx, z, axis)
    n = ctx.int(1) if not ctx.is_none(1) else length
    norm = None if ctx.is_none(3) else str(ctx.const(3))
    return _resized(ctx.b, z, axis, length, n), axis, n, norm


@RULES.rule("aten::fft_fft", "aten::fft_ifft")
@COMPLEX_RULES.rule("aten::fft_fft", "aten::fft_ifft")
def fft(ctx: LoweringContext) -> Complex:
    inverse = ctx.kind == "aten::fft_ifft"
    z, axis, n, norm = _fft_args(ctx)
    return scaled(ctx.b, _transform(ctx, z, axis, inverse), _norm_factor(norm, n, inverse))


@RULES.rule("aten::fft_rfft")
def rfft(ctx: LoweringContext) -> Complex:
    z, axis, n, norm = _fft_args(ctx)
    full = scaled(ctx.b, _transform(ctx, z, axis, False), _norm_factor(norm, n, False))
    return Complex(slice_axis(ctx.b, full.pair, axis, 0, n // 2 + 1))


@RULES.rule("aten::fft_irfft")
@COMPLEX_RULES.rule("aten::fft_irfft")
def irfft(ctx: LoweringContext) -> Value:
    b = ctx.b
    z = _complex_arg(ctx, 0)
    axis = norm_axis(ctx.int(2), z.rank) if not ctx.is_none(2) else z.rank - 1
    bins = _static_length(ctx, z, axis)
    n = ctx.int(1) if not ctx.is_none(1) else 2 * (bins - 1)
    if n < 1:
        raise ctx.unsupported(f"irfft of {bins} bins gives no samples; pass n")
    half = n // 2 + 1
    z = _resized(b, z, axis, bins, half)
    pieces = [z.pair]
    if n - half > 0:  # X[k] = conj(X[n - k]) for k in half..n-1
        mirrored = b.op("reverse", slice_axis(b, z.pair, axis, 1, n - half + 1), axes=(axis,))
        pieces.append(conjugate(b, Complex(mirrored)).pair)
    full = Complex(b.op("concat", *pieces, axis=axis)) if len(pieces) > 1 else z
    norm = None if ctx.is_none(3) else str(ctx.const(3))
    out = scaled(b, _transform(ctx, full, axis, True), _norm_factor(norm, n, True))
    return part(b, out, 0)


def _stft_window(ctx: LoweringContext, n_fft: int, win_length: int, dtype: DType) -> Value | None:
    window = ctx.optional(4)
    if window is None:
        if win_length == n_fft:
            return None
        return ctx.b.const(np.ones(win_length, dtype.numpy), dtype)
    w = ctx.tensor(4)
    if w.rank != 1 or w.type.shape[0] != win_length:
        raise ctx.unsupported(f"the STFT window has shape {list(w.type.shape)}, expected [{win_length}]")
    return ctx.b.cast(w, dtype)


@RULES.rule("aten::stft")
@COMPLEX_RULES.rule("aten::stft")
def stft(ctx: LoweringContext) -> Complex | Value:
    """``torch.stft``: frames of ``n_fft`` samples, ``hop_length`` apart, windowed (the
    window centred in the frame), transformed; ``[..., freq, frames]``. The ``center``
    overload pads first (traces of ``torch.stft`` pad with a separate op)."""
    b = ctx.b
    real_input = not isinstance(ctx.raw(0), Complex)
    z = _complex_arg(ctx, 0)
    n_fft = ctx.int("n_fft")
    hop = ctx.int("hop_length") if not ctx.is_none("hop_length") else n_fft // 4
    win_length = ctx.int("win_length") if not ctx.is_none("win_length") else n_fft
    if ctx.has("center") and ctx.bool("center"):
        mode = str(ctx.const("pad_mode")) if ctx.has("pad_mode") else "reflect"
        if not real_input:
            raise ctx.unsupported("a centred STFT of a complex signal")
        pads = ((0, 0),) * (z.rank - 1) + ((n_fft // 2, n_fft // 2), (0, 0))
        signal = b.op("pad", part(b, z, 0), pads=pads[:-1], mode=_pad_mode(ctx, mode))
        z = of_real(b, signal)
    normalized = ctx.bool("normalized") if ctx.has("normalized") else False
    onesided = ctx.optional("onesided") if ctx.has("onesided") else None
    onesided = real_input if onesided is None else bool(onesided)
    return_complex = ctx.optional("return_complex") if ctx.has("return_complex") else None
    if z.rank not in (1, 2):
        raise ctx.unsupported(f"an STFT of a {z.rank}-D signal (PyTorch takes [T] or [B, T])")
    single = z.rank == 1
    if single:
        z = Complex(b.op("unsqueeze", z.pair, axes=(0,)))
    window = _stft_window(ctx, n_fft, win_length, z.dtype)
    inputs = [z.pair] if window is None else [z.pair, window]
    frames = b.op("stft", *inputs, axis=1, frame=n_fft, stride=hop)  # [B, frames, n_fft, 2]
    if onesided:
        frames = slice_axis(b, frames, 2, 0, n_fft // 2 + 1)
    spec = Complex(b.op("transpose", frames, perm=(0, 2, 1, 3)))  # [B, freq, frames, 2]
    if normalized:
        spec = scaled(b, spec, 1.0 / math.sqrt(n_fft))
    if single:
        spec = Complex(b.op("squeeze", spec.pair, axes=(0,)))
    return spec if return_complex is None or bool(return_complex) else spec.pair


def _pad_mode(ctx: LoweringContext, mode: str) -> str:
    modes = {"reflect": "reflect", "constant": "constant", "replicate": "replicate", "circular": "circular"}
    if mode not in modes:
        raise ctx.unsupported(f"STFT pad_mode {mode!r}")
    return modes[mode]


@RULES.rule("aten::view_as_complex")
def view_as_complex(ctx: LoweringContext) -> Complex:
    x = ctx.tensor(0)
    if x.rank < 1 or x.type.shape[-1] != 2:
        raise ctx.unsupported("view_as_complex needs a last axis of size 2")
    return Complex(x)


@RULES.rule("aten::complex")
def complex_(ctx: LoweringContext) -> Complex:
    re, im = ctx.promoted(ctx.raw(0), ctx.raw(1))
    return from_parts(ctx.b, re, im)


@RULES.rule("aten::polar")
def polar(ctx: LoweringContext) -> Complex:
    magnitude, angle = ctx.promoted(ctx.raw(0), ctx.raw(1))
    b = ctx.b
    return from_parts(b, b.op("mul", magnitude, b.op("cos", angle)), b.op("mul", magnitude, b.op("sin", angle)))


WINDOWS = {"aten::hann_window": torch.hann_window, "aten::hamming_window": torch.hamming_window,
           "aten::blackman_window": torch.blackman_window, "aten::bartlett_window": torch.bartlett_window}


@RULES.rule(*WINDOWS)
def window(ctx: LoweringContext) -> Value:
    """Window functions are constants of their length (computed by PyTorch itself)."""
    length = ctx.int(0)
    periodic = ctx.bool(1) if ctx.n_inputs > 5 and not ctx.is_none(1) else True
    dtype = ctx.traced_dtype(0) or DType.F32
    values = WINDOWS[ctx.kind](length, periodic=periodic, dtype=torch.float64).numpy()
    return ctx.b.const(values.astype(dtype.numpy), dtype)


# -- the complex ops applied to real tensors (complex ones go to lowering/complex.py) ----

@RULES.rule("aten::real", "aten::conj", "aten::conj_physical", "aten::_conj", "aten::_conj_physical",
            notes="complex tensors as (real, imaginary) pairs")
def real_of_real(ctx: LoweringContext) -> Value:
    """A real tensor is its own real part and its own conjugate."""
    return ctx.tensor(0)


@RULES.rule("aten::angle", notes="complex tensors as (real, imaginary) pairs")
def angle_of_real(ctx: LoweringContext) -> Value:
    """π for negative numbers, 0 otherwise (NaN stays NaN), as PyTorch's angle of a real."""
    x = ctx.tensor(0)
    if not x.type.dtype.is_float:
        x = ctx.b.cast(x, DType.F32)
    b, dt = ctx.b, x.type.dtype
    zero = b.const(np.asarray(0.0, dt.numpy), dt)
    sign = b.op("select", b.op("lt", x, zero), b.const(np.asarray(math.pi, dt.numpy), dt), zero)
    return b.op("select", b.op("is_nan", x), x, sign)


@RULES.rule("aten::imag", "aten::view_as_real", notes="complex tensors as (real, imaginary) pairs")
def needs_complex(ctx: LoweringContext) -> Value:
    raise ctx.unsupported(f"{ctx.kind} of a real tensor (PyTorch raises too)")
