"""The Q4_0 arithmetic on slabs of blocks, in few passes over cache-sized temporaries.

Every path that makes Q4_0 codes (``t2n.quantize`` in memory, the ``.dat`` writer, the
streamed checkpoint export) computes them here, so they give the same bytes:

* the scale of a block is ``f16(top / -8)``, ``top`` its largest value or its smallest,
  whichever has the larger magnitude (the largest on a tie), or with a percentile
  recipe that quantile of the magnitudes, signed like ``top``;
* the code of a value ``v`` is ``floor(v * inv + 8.5)`` clamped to 0..15, with
  ``inv = f32(1) / f32(d)`` (0 for a zero scale: codes 8), each step rounded to f32.

Speed: per-block reductions and the per-block multiply use PyTorch's kernels when torch
is already loaded (numpy's reductions over 32 values are ~15x slower; the bits are the
same: a maximum is exact and a product is one IEEE rounding), numpy otherwise. The
codes are made in a "half-major" layout ``[2, n, 16]`` (element ``j`` of each block in
half ``j // 16``), which turns the nibble packing into two whole-array operations on
64-bit words. Temporaries live in per-thread scratch buffers, reused slab after slab.
Callers run these on the threads of :mod:`t2n.quant.parallel`, where PyTorch's kernels
run in the calling thread (its own thread pool on a busy machine is many times slower
for such short kernels). Never imports torch.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import numpy as np

from t2n.ir import DType

BLOCK = 32
BLOCK_BYTES = 18
SLAB_BLOCKS = 8192
"""Blocks per slab (262,144 values): a slab's temporaries (~2.5 MB) stay in the CPU's
cache, and the per-call overhead of numpy and PyTorch is spread over many values."""

_F32 = np.float32
_PACKED = np.dtype({"names": ["d", "qs"], "formats": ["<u2", ("<u8", (2,))],
                    "offsets": [0, 2], "itemsize": BLOCK_BYTES})
"""One Q4_0 block: the f16 scale's bits, then 16 bytes of nibbles as two 64-bit words."""


def _torch() -> Any:
    """The torch module when it is already loaded (None otherwise: never imported here)."""
    return sys.modules.get("torch")


class _Scratch(threading.local):
    """Per-thread temporaries, grown on demand and reused."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def get(self, name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        size = int(np.prod(shape))
        have = self.arrays.get(name)
        if have is None or have.size < size or have.dtype != dtype:
            have = np.empty(max(size, SLAB_BLOCKS * BLOCK), dtype=dtype)
            self.arrays[name] = have
        return have[:size].reshape(shape)


_SCRATCH = _Scratch()


# -- conversions ----------------------------------------------------------------------


def f16(a: np.ndarray) -> np.ndarray:
    """f32 → f16, rounded to nearest even: PyTorch's kernel (17x faster than numpy's)
    when torch is loaded, numpy's otherwise; the same bits."""
    torch = _torch()
    if torch is not None and a.dtype == np.float32 and a.flags.c_contiguous and a.flags.writeable:
        return np.asarray(torch.from_numpy(a).to(torch.float16).numpy())
    return a.astype(np.float16)


def f32(a: np.ndarray) -> np.ndarray:
    """f16 → f32 (exact), with PyTorch's kernel when it is loaded."""
    torch = _torch()
    if torch is not None and a.dtype == np.float16 and a.flags.c_contiguous:
        return np.asarray(torch.from_numpy(np.require(a, requirements="W")).to(torch.float32).numpy())
    return a.astype(np.float32)


def _copy(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` converting the dtype (f32 ↔ f16 round to nearest even)."""
    torch = _torch()
    if torch is not None and src.flags.c_contiguous and dst.flags.c_contiguous:
        torch.from_numpy(dst).copy_(torch.from_numpy(np.require(src, requirements="W")))
    else:
        np.copyto(dst, src, casting="unsafe")


def round_to(values: np.ndarray, dtype: DType) -> np.ndarray:
    """f32 ``values`` rounded to ``dtype`` (nearest even) and widened back, in place
    when they are writable (a new array otherwise)."""
    if dtype is DType.F32:
        return values
    out = values if values.flags.writeable and values.flags.c_contiguous else np.empty_like(values)
    if dtype is DType.F16:
        half = _SCRATCH.get("round_f16", values.shape, np.float16)
        _copy(half, values)
        _copy(out, half)
        return out
    bits = values.view(np.uint32)
    rounded = bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))
    np.bitwise_and(rounded, np.uint32(0xFFFF0000), out=out.view(np.uint32))
    return out


def values_of(raw: np.ndarray, dtype: DType, rounding: tuple[DType, ...] = ()) -> np.ndarray:
    """Raw elements of float ``dtype`` (bf16 as its bits) as f32 values, then rounded
    to each dtype of ``rounding`` in turn (a checkpoint's f32 weight in an f16 model).
    May return ``raw`` itself (f32, nothing to round): callers never write to it.
    (PyTorch's reductions and products on f16 are several times slower than on f32.)"""
    if dtype is DType.F32 and not rounding:
        return raw
    out = _SCRATCH.get("values", raw.shape, np.float32)
    if dtype is DType.BF16:
        np.left_shift(raw.astype(np.uint32), np.uint32(16), out=out.view(np.uint32))
    elif dtype is DType.F32 and rounding[0] is DType.F16:  # round straight from the raw values
        half = _SCRATCH.get("round_f16", raw.shape, np.float16)
        _copy(half, raw)
        _copy(out, half)
        rounding = rounding[1:]
    else:
        _copy(out, raw)
    for step in rounding:
        round_to(out, step)
    return out


def _wide(values: np.ndarray) -> np.ndarray:
    """``values`` as f32 (numpy's own f16 arithmetic rounds to f16: widen first)."""
    return values if values.dtype == np.float32 else values.astype(np.float32)


# -- scales ---------------------------------------------------------------------------


def _extremes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per block of ``values`` ``[n, 32]``: (largest, smallest), in f32."""
    torch = _torch()
    if torch is not None:
        t = torch.from_numpy(np.require(values, requirements=["C", "W"]))
        return torch.amax(t, dim=1).float().numpy(), torch.amin(t, dim=1).float().numpy()
    return np.max(_wide(values), axis=1), np.min(_wide(values), axis=1)


def block_scales(values: np.ndarray, percentile: float = 1.0) -> np.ndarray:
    """The f16 scale of each block of ``values`` ``[n, 32]``: ``top / -8`` (see the
    module docstring)."""
    top, low = _extremes(values)
    np.copyto(top, low, where=top < -low)  # the largest value unless the smallest is larger in magnitude
    if percentile < 1.0:
        mags = np.quantile(np.abs(_wide(values)), percentile, axis=1).astype(np.float32)
        top = mags * np.where(top < 0, np.float32(-1), np.float32(1))
    top *= np.float32(-0.125)  # exactly top / -8 (both the exact quotient, rounded once)
    return f16(np.ascontiguousarray(top, dtype=np.float32))


def inverses(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(``d``, ``1 / d``) in f32 of f16 ``scales`` (``1 / d`` is 0 where ``d`` is 0)."""
    d = f32(np.ascontiguousarray(scales, dtype=np.float16))
    inverse = np.zeros_like(d)
    np.divide(np.float32(1), d, out=inverse, where=d != 0)
    return d, inverse


# -- codes ----------------------------------------------------------------------------


def codes(values: np.ndarray, inverse: np.ndarray) -> np.ndarray:
    """The codes (uint8 0..15) of ``values`` ``[n, 32]`` at the per-block ``inverse``,
    in half-major layout ``[2, n, 16]`` (a scratch array, valid until the next call)."""
    n = values.shape[0]
    q = _SCRATCH.get("q", (2, n, 16), _F32)
    torch = _torch()
    by_block = values.reshape(n, 2, 16)
    if torch is not None:  # f16 values are widened exactly, then multiplied in f32
        torch.mul(torch.from_numpy(np.require(by_block, requirements="W")).transpose(0, 1),
                  torch.from_numpy(inverse)[None, :, None], out=torch.from_numpy(q))
    else:
        np.multiply(_wide(by_block).transpose(1, 0, 2), inverse[None, :, None], out=q)
    q += np.float32(8.5)
    # floor then clamp to 0..15 equals clamp then truncate (values >= 0): one pass less
    np.clip(q, np.float32(0), np.float32(15), out=q)
    out = _SCRATCH.get("codes", (2, n, 16), np.uint8)
    with np.errstate(invalid="ignore"):  # NaN (a NaN value or scale): its block is refused by the caller
        np.copyto(out, q, casting="unsafe")
    return out


def pack_into(half_codes: np.ndarray, scales: np.ndarray, out: np.ndarray) -> None:
    """Write blocks (``n * 18`` bytes into ``out``) from half-major codes ``[2, n, 16]``
    and f16 ``scales`` ``[n]``: the scale, then byte ``j`` = code ``j`` | code ``j + 16``
    << 4. Codes are at most 15, so shifting a 64-bit word of them moves no bit across
    bytes, whatever the byte order."""
    n = half_codes.shape[1]
    words = half_codes.reshape(2, n * 16).view(np.uint64)
    packed = _SCRATCH.get("packed", (n * 2,), np.uint64)
    np.left_shift(words[1], np.uint64(4), out=packed)
    packed |= words[0]
    blocks = out.view(_PACKED)
    blocks["qs"] = packed.reshape(n, 2)  # one copy into the unaligned field beats computing there
    blocks["d"] = np.ascontiguousarray(scales, dtype="<f2").view("<u2")


def dequantized(half_codes: np.ndarray, d: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``(q - 8) * d`` in f32 (exact) into ``out`` ``[n, 32]`` (block-major)."""
    n = half_codes.shape[1]
    q = _SCRATCH.get("dq", (2, n, 16), _F32)
    np.copyto(q, half_codes, casting="unsafe")
    q -= np.float32(8)
    target = out.reshape(n, 2, 16)
    torch = _torch()
    if torch is not None and out.flags.c_contiguous and out.flags.writeable:
        torch.mul(torch.from_numpy(q).transpose(0, 1), torch.from_numpy(d)[:, None, None],
                  out=torch.from_numpy(target))
    else:
        np.multiply(q.transpose(1, 0, 2), d[:, None, None], out=target)
    return out


# -- one slab -------------------------------------------------------------------------


def encode_fresh(values: np.ndarray, percentile: float, out: np.ndarray) -> np.ndarray:
    """Quantize ``values`` ``[n, 32]`` (f32, not changed): blocks into ``out``
    (``n * 18`` bytes); returns the f16 scales."""
    scales = block_scales(values, percentile)
    _, inverse = inverses(scales)
    pack_into(codes(values, inverse), scales, out)
    return scales


def encode_checked(values: np.ndarray, scales: np.ndarray, dtype: DType, out: np.ndarray) -> int:
    """Blocks of ``values`` ``[n, 32]`` (f32, not changed) at the given f16 ``scales``
    into ``out``; returns the first block whose values are not ``(q - 8) * d`` rounded
    to ``dtype`` (the weight was changed after quantization), or -1."""
    d, inverse = inverses(scales)
    half = codes(values, inverse)
    back = round_to(dequantized(half, d, _SCRATCH.get("back", values.shape, _F32)), dtype)
    if not _equal(back, values):
        return int(np.argwhere((back != _wide(values)).any(axis=1))[0, 0])
    pack_into(half, scales, out)
    return -1


def _equal(back: np.ndarray, values: np.ndarray) -> bool:
    """Whether f32 ``back`` holds ``values`` (f32 or f16) exactly (NaN never does)."""
    torch = _torch()
    if torch is None:
        return bool(np.array_equal(back, _wide(values)))
    other = torch.from_numpy(np.require(values, requirements=["C", "W"]))
    if values.dtype != np.float32:
        narrow = _SCRATCH.get("narrow", values.shape, values.dtype)
        _copy(narrow, back)  # exact: back holds values of that dtype (else unequal anyway)
        return bool(torch.equal(torch.from_numpy(narrow), other))
    return bool(torch.equal(torch.from_numpy(back), other))


def dequantize_fresh(values: np.ndarray, percentile: float, dtype: DType, out: np.ndarray) -> np.ndarray:
    """Quantize ``values`` ``[n, 32]`` (f32, not changed): their Q4_0 values rounded to
    ``dtype`` (f32 or f16) into ``out`` (``n * 32`` elements of ``dtype``); returns the
    f16 scales."""
    scales = block_scales(values, percentile)
    d, inverse = inverses(scales)
    back = dequantized(codes(values, inverse), d, _SCRATCH.get("back", values.shape, _F32))
    _copy(out.reshape(values.shape), back)
    return scales


def quantize_values_(values: np.ndarray, percentile: float = 1.0) -> np.ndarray:
    """Replace ``values`` ``[n, 32]`` (f32, in place) by their Q4_0 values ``(q - 8) * d``
    (f32, exact); returns the f16 scales."""
    out = np.empty(values.shape[0], np.float16)
    for start in range(0, values.shape[0], SLAB_BLOCKS):
        slab = values[start:start + SLAB_BLOCKS]
        scales = block_scales(slab, percentile)
        d, inverse = inverses(scales)
        dequantized(codes(slab, inverse), d, slab)
        out[start:start + slab.shape[0]] = scales
    return out


__all__ = ["BLOCK", "BLOCK_BYTES", "SLAB_BLOCKS", "block_scales", "codes", "dequantized", "dequantize_fresh",
           "encode_checked", "encode_fresh", "f16", "f32", "inverses", "pack_into", "quantize_values_", "round_to", "values_of"]
