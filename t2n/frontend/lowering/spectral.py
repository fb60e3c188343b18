"""Fourier transforms and the window functions audio front-ends use.

``torch.stft``/``istft`` lower to the IR's ``stft`` and ``fft`` (tract's
``tract_core_stft``/``tract_core_fft``), on complex tensors held as
:class:`~t2n.frontend.complex_tensors.Complex` pairs; ``torch.fft`` calls, over one axis
or several, are in :mod:`.spectral_nd`, built on the helpers here. tract's transforms are
not normalized; PyTorch's ``norm`` modes become a scale. An inverse real FFT rebuilds the
Hermitian half it was not given (``X[n-k] = conj(X[k])``) and keeps the real part.
``torch.stft`` (its centre padding is traced as a separate ``pad``) frames along the last
axis, takes the one-sided half, and puts frequencies before frames as PyTorch does.
Transform lengths and axes must be static. ``RULES`` take real inputs; ``COMPLEX_RULES``
the same ops on complex inputs (the lowering driver picks them when an argument is complex).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from t2n.frontend.complex_tensors import Complex, conjugate, from_parts, of_real, part, scaled
from t2n.frontend.context import LoweringContext
from t2n.frontend.lowering.shape import slice_axis
from t2n.frontend.registry import RuleSet
from t2n.ir import Builder, Dim, DType, Sym, Value
from t2n.ir.dims import SymbolicComparisonError, decide

RULES = RuleSet("spectral")
COMPLEX_RULES = RuleSet("spectral/complex")


def complex_arg(ctx: LoweringContext, key: int | str) -> Complex:
    x = ctx.raw(key)
    if isinstance(x, Complex):
        return x
    v = ctx.tensor(key)
    if not v.type.dtype.is_float:
        v = ctx.b.cast(v, DType.F32)
    return of_real(ctx.b, v)


def static_length(ctx: LoweringContext, z: Complex, axis: int) -> int:
    n = z.shape[axis]
    if not isinstance(n, int):
        raise ctx.unsupported(f"a Fourier transform over axis {axis}, whose length is symbolic ({n}): "
                              "tract's FFT needs a fixed length here; keep that axis static")
    return n


def resized(b: Builder, z: Complex, axis: int, length: int, n: int) -> Complex:
    """``z`` cut or zero-padded to ``n`` along ``axis`` (PyTorch's ``n`` argument)."""
    if n == length:
        return z
    if n < length:
        return Complex(slice_axis(b, z.pair, axis, 0, n))
    pads = [(0, 0)] * (z.rank + 1)
    pads[axis] = (0, n - length)
    return Complex(b.op("pad", z.pair, pads=tuple(pads), mode="constant", value=0.0))


def norm_factor(norm: str | None, n: int, inverse: bool) -> float:
    """The scale PyTorch's ``norm`` puts on an unnormalized transform of length ``n``."""
    mode = norm or "backward"
    if mode == "ortho":
        return 1.0 / math.sqrt(n)
    if mode == ("backward" if inverse else "forward"):
        return 1.0 / n
    return 1.0


def transform(ctx: LoweringContext, z: Complex, axis: int, inverse: bool) -> Complex:
    return Complex(ctx.b.op("fft", z.pair, axis=axis, inverse=inverse))


def inverse_real(ctx: LoweringContext, z: Complex, axis: int, n: int, factor: float) -> Value:
    """The ``n`` real samples whose spectrum's first half is ``z`` along ``axis`` (PyTorch's
    c2r transform): the Hermitian half it was not given is rebuilt, the full spectrum
    transformed back and scaled by ``factor``, and its real part kept."""
    b = ctx.b
    half = n // 2 + 1
    z = resized(b, z, axis, z.shape[axis], half)  # type: ignore[arg-type]
    pieces = [z.pair]
    if n - half > 0:  # X[k] = conj(X[n - k]) for k in half..n-1
        mirrored = b.op("reverse", slice_axis(b, z.pair, axis, 1, n - half + 1), axes=(axis,))
        pieces.append(conjugate(b, Complex(mirrored)).pair)
    full = Complex(b.op("concat", *pieces, axis=axis)) if len(pieces) > 1 else z
    out = scaled(b, transform(ctx, full, axis, True), factor)
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
    z = complex_arg(ctx, 0)
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


@RULES.rule("aten::istft")
@COMPLEX_RULES.rule("aten::istft")
def istft(ctx: LoweringContext) -> Complex | Value:
    """``torch.istft``: each frame transformed back (PyTorch's c2r transform, or the full
    inverse for ``return_complex``), windowed, overlap-added ``hop_length`` apart, and
    divided by the overlap-added squared window; then cut as PyTorch cuts (``center``,
    ``length``). The frame count may be a dynamic axis: every step keeps it."""
    b = ctx.b
    z = complex_arg(ctx, 0)
    n_fft = ctx.int("n_fft")
    hop = ctx.int("hop_length") if not ctx.is_none("hop_length") else n_fft // 4
    win_length = ctx.int("win_length") if not ctx.is_none("win_length") else n_fft
    center = ctx.bool("center") if ctx.has("center") else True
    normalized = ctx.bool("normalized") if ctx.has("normalized") else False
    return_complex = ctx.bool("return_complex") if ctx.has("return_complex") else False
    if z.rank not in (2, 3):
        raise ctx.unsupported(f"an inverse STFT of a {z.rank}-D spectrum (PyTorch takes [freq, frames] "
                              "or [B, freq, frames])")
    if not 0 < win_length <= n_fft or not 0 < hop <= win_length:
        raise ctx.unsupported("istft needs 0 < hop_length <= win_length <= n_fft (PyTorch raises too)")
    single = z.rank == 2
    if single:
        z = Complex(b.op("unsqueeze", z.pair, axes=(0,)))
    bins = static_length(ctx, z, 1)
    given = ctx.optional("onesided") if ctx.has("onesided") else None
    onesided = bins != n_fft if given is None else bool(given)
    if bins != (n_fft // 2 + 1 if onesided else n_fft):
        raise ctx.unsupported(f"istft of {bins} frequency bins with n_fft={n_fft} and onesided={onesided} "
                              "(PyTorch raises too)")
    if return_complex and onesided:
        raise ctx.unsupported("istft with return_complex=True of a one-sided spectrum (PyTorch raises too)")
    window = _istft_window(ctx, n_fft, win_length, z.dtype)
    frames = Complex(b.op("transpose", z.pair, perm=(0, 2, 1, 3)))  # [B, frames, freq, 2]
    parts = _frames_back(ctx, frames, n_fft, normalized, return_complex)
    if window is not None:
        parts = [b.op("mul", p, window) for p in parts]
    parts = [overlap_add(b, p, hop) for p in parts]
    squared = window if window is None else b.op("mul", window, window)
    envelope = overlap_add(b, _frames_like(b, frames.pair, squared, n_fft, z.dtype), hop)
    cut = _istft_cut(ctx, z.shape[2], n_fft, hop, center)
    parts = [cut(b.op("div", p, envelope)) for p in parts]
    if single:
        parts = [b.op("squeeze", p, axes=(0,)) for p in parts]
    return from_parts(b, parts[0], parts[1]) if return_complex else parts[0]


def _frames_back(ctx: LoweringContext, frames: Complex, n_fft: int, normalized: bool,
                 return_complex: bool) -> list[Value]:
    """Each frame's signal (``[B, frames, n_fft]``; its real and imaginary parts for
    ``return_complex``), scaled as PyTorch scales (``1/n_fft``, or ``1/sqrt(n_fft)``
    normalized)."""
    b = ctx.b
    factor = 1.0 / math.sqrt(n_fft) if normalized else 1.0 / n_fft
    if return_complex:
        signal = scaled(b, transform(ctx, frames, 2, True), factor)
        return [part(b, signal, 0), part(b, signal, 1)]
    return [inverse_real(ctx, frames, 2, n_fft, factor)]


def _istft_window(ctx: LoweringContext, n_fft: int, win_length: int, dtype: DType) -> Value | None:
    """The window of ``win_length`` samples centred in ``n_fft`` (None: all ones)."""
    window = _stft_window(ctx, n_fft, win_length, dtype)
    if window is None or win_length == n_fft:
        return window
    left = (n_fft - win_length) // 2
    return ctx.b.op("pad", window, pads=((left, n_fft - win_length - left),), mode="constant", value=0.0)


def _frames_like(b: Builder, spectrum: Value, squared: Value | None, n_fft: int, dtype: DType) -> Value:
    """The squared window repeated for each frame of ``spectrum`` ([B, frames, freq, 2]):
    ``[1, frames, n_fft]``, its frame count read from the graph."""
    one = squared if squared is not None else b.const(np.ones(n_fft, dtype.numpy), dtype)
    count = b.op("slice", b.op("shape_of", spectrum), b.ints([1]), b.ints([2]), axes=(0,), steps=(1,))
    return b.op("expand", one, b.op("concat", b.ints([1]), count, b.ints([n_fft]), axis=0))


def overlap_add(b: Builder, frames: Value, hop: int) -> Value:
    """``[B, N, F]`` frames summed ``hop`` samples apart into ``[B, (N + R - 1) * hop]``
    with ``R = ceil(F / hop)`` (the frames zero-padded to ``R * hop``): each frame is cut
    into ``R`` chunks of ``hop``, chunk ``r`` of frame ``i`` lands on output chunk
    ``i + r``, so the sum is ``R`` shifted copies (static pads: the frame count may be
    symbolic)."""
    n = frames.type.shape[2]
    assert isinstance(n, int)
    chunks = -(-n // hop)
    if chunks * hop > n:
        frames = b.op("pad", frames, pads=((0, 0), (0, 0), (0, chunks * hop - n)), mode="constant", value=0.0)
    lead = b.op("slice", b.op("shape_of", frames), b.ints([0]), b.ints([2]), axes=(0,), steps=(1,))
    split = b.op("reshape", frames, b.op("concat", lead, b.ints([chunks, hop]), axis=0))  # [B, N, R, hop]
    total: Value | None = None
    for r in range(chunks):
        piece = b.op("squeeze", slice_axis(b, split, 2, r, r + 1), axes=(2,))
        if chunks > 1:
            piece = b.op("pad", piece, pads=((0, 0), (r, chunks - 1 - r), (0, 0)), mode="constant", value=0.0)
        total = piece if total is None else b.op("add", total, piece)
    assert total is not None
    batch = b.op("slice", b.op("shape_of", total), b.ints([0]), b.ints([1]), axes=(0,), steps=(1,))
    return b.op("reshape", total, b.op("concat", batch, b.ints([-1]), axis=0))


def _istft_cut(ctx: LoweringContext, frames: Dim, n_fft: int, hop: int, center: bool) -> Callable[[Value], Value]:
    """The cut PyTorch makes of the overlap-added ``[B, L]`` signal (``L = (N + R - 1) *
    hop``, of which the first ``(N - 1) * hop + n_fft`` samples are the signal): from
    ``n_fft // 2`` when centred, to ``length`` samples (zero-padded past the signal) or
    to the signal's end less ``n_fft // 2`` when centred. Bounds are kept relative to the
    end, or taken from the ``length`` value, so that they follow a dynamic frame count."""
    b = ctx.b
    start = n_fft // 2 if center else 0
    tail = -(-n_fft // hop) * hop - n_fft  # samples past the signal's end
    length = ctx.optional("length") if ctx.has("length") else None
    if length is None:
        back = tail + (n_fft // 2 if center else 0)
        return lambda y: slice_axis(b, y, 1, start, -back if back else None)
    signal = (frames - 1) * hop + n_fft
    size = _size_of(length)
    if size is None:
        raise ctx.unsupported("istft with a length computed from tensor data")
    end: Dim = start + size
    try:
        past = decide("gt", end, signal)
    except SymbolicComparisonError:
        past = False  # tract refuses a slice out of range at run time: never a wrong result
    if not past:
        bound: int | Value = (b.op("add", _i64(b, length), _i64(b, start)) if isinstance(length, Value)
                              else start + int(length))
        return lambda y: slice_axis(b, y, 1, start, bound)
    extra = end - signal
    if not isinstance(extra, int):
        raise ctx.unsupported("istft with a length past the signal by an amount that changes with the input size")

    def padded(y: Value) -> Value:
        kept = slice_axis(b, y, 1, start, -tail if tail else None)
        return b.op("pad", kept, pads=((0, 0), (0, extra)), mode="constant", value=0.0)

    return padded


def _size_of(v: object) -> Dim | None:
    """A size argument (an int, or a value computed from sizes) as a dimension."""
    if isinstance(v, int):
        return v
    if isinstance(v, Value) and v.known is not None and v.known.size == 1:
        k = v.known.reshape(()).item()
        return k if isinstance(k, (int, Sym)) else int(k)
    return None


def _i64(b: Builder, v: object) -> Value:
    return b.cast(v, DType.I64) if isinstance(v, Value) else b.const(np.asarray(v, np.int64), DType.I64)


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
