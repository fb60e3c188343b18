"""Fourier transforms of complex numbers stored as a trailing axis of 2 (real,
imaginary), the form tract's own operators take.

The IR has no complex dtype: the frontend represents a complex tensor of shape ``S``
as a real one of shape ``S + [2]`` and lowers complex arithmetic to real ops on it.
Only the transforms need ops of their own (tract's ``tract_core_fft`` and
``tract_core_stft``; Khronos NNEF has neither).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from t2n.ir.attributes import BOOL, INT, required
from t2n.ir.dims import Dim
from t2n.ir.infer_utils import InferError, tensor
from t2n.ir.schema import InferContext, OpTable
from t2n.ir.types import TensorType

TABLE = OpTable("spectral")


def _complex(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return np.asarray(x[..., 0] + 1j * x[..., 1])


def _pair(c: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return np.stack([c.real, c.imag], axis=-1).astype(dtype)


def _check_pairs(x: TensorType, axis: int, what: str) -> None:
    if not x.dtype.is_float:
        raise InferError(f"{what}: the input holds complex numbers as float pairs, not {x.dtype}")
    if x.rank < 2 or x.shape[-1] != 2:
        raise InferError(f"{what}: the input's last axis holds (real, imaginary) and must have size 2")
    if not 0 <= axis < x.rank - 1:
        raise InferError(f"{what}: axis {axis} out of range (the last axis is the complex one)")


def _eval_fft(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
    c = _complex(xs[0])
    axis = int(a["axis"])
    out = np.fft.ifft(c, axis=axis) * c.shape[axis] if a["inverse"] else np.fft.fft(c, axis=axis)
    return [_pair(out, xs[0].dtype)]


@TABLE.op("fft", evaluate=_eval_fft, attrs={"axis": required(INT), "inverse": required(BOOL)})
def _fft(ctx: InferContext) -> list[TensorType]:
    """fft(x; axis, inverse): the discrete Fourier transform along ``axis`` (forward:
    ``exp(-2πi kn/N)``; ``inverse``: ``exp(+2πi kn/N)``, not divided by N)."""
    x = ctx.types[0]
    _check_pairs(x, int(ctx.attrs["axis"]), "fft")
    return [x]


def stft_frames(length: Dim, frame: int, stride: int) -> Dim:
    """How many whole frames of ``frame`` samples, ``stride`` apart, fit in ``length``."""
    return (length - frame) // stride + 1


def _eval_stft(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
    c = _complex(xs[0])
    axis, frame, stride = int(a["axis"]), int(a["frame"]), int(a["stride"])
    count = int(stft_frames(c.shape[axis], frame, stride))
    starts = np.arange(count)[:, None] * stride + np.arange(frame)[None, :]
    frames = np.take(c, starts, axis=axis)  # axis → (frames, frame)
    if len(xs) > 1:
        w = np.asarray(xs[1], dtype=np.float64)
        left = (frame - w.shape[0]) // 2
        full = np.zeros(frame)
        full[left:left + w.shape[0]] = w
        shape = [1] * frames.ndim
        shape[axis + 1] = frame
        frames = frames * full.reshape(shape)
    return [_pair(np.fft.fft(frames, axis=axis + 1), xs[0].dtype)]


@TABLE.op("stft", evaluate=_eval_stft, attrs={"axis": required(INT), "frame": required(INT), "stride": required(INT)})
def _stft(ctx: InferContext) -> list[TensorType]:
    """stft(x[, window]; axis, frame, stride): the signal along ``axis`` cut into frames
    of ``frame`` samples, ``stride`` apart (only whole ones), each multiplied by
    ``window`` (a 1-D constant of at most ``frame`` values, centred with zeros) and
    Fourier-transformed: ``axis`` becomes the frame index, followed by a new axis of
    ``frame`` frequencies."""
    x = ctx.types[0]
    axis, frame, stride = int(ctx.attrs["axis"]), int(ctx.attrs["frame"]), int(ctx.attrs["stride"])
    _check_pairs(x, axis, "stft")
    if frame < 1 or stride < 1:
        raise InferError("stft: frame and stride must be positive")
    if len(ctx.types) > 1:
        w = ctx.types[1]
        if w.rank != 1 or w.dtype != x.dtype or not isinstance(w.shape[0], int) or w.shape[0] > frame:
            raise InferError(f"stft: the window is a 1-D {x.dtype} tensor of at most {frame} values")
    shape: list[Dim] = list(x.shape)
    length = shape[axis]
    if isinstance(length, int) and length < frame:
        raise InferError(f"stft: {length} samples hold no frame of {frame}")
    shape[axis] = stft_frames(length, frame, stride)
    shape.insert(axis + 1, frame)
    return [tensor(x.dtype, shape)]
