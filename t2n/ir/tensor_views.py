"""Tensor data made from other tensor data without a copy of the whole: a slice along
one axis, several tensors joined along an axis (concatenated or stacked), and a
computed tensor for rearrangements that need their source whole (a transpose).

They read their sources chunk by chunk (:meth:`TensorData.iter_chunks`), so a tensor
joined from per-expert weights of a checkpoint, or one half of a fused weight, streams
into an artifact a few MB at a time; :meth:`raw` gives the whole array when asked.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from t2n.ir.dtypes import DType
from t2n.ir.tensor_data import DEFAULT_CHUNK_BYTES, TensorData


class _Rows:
    """Reads a tensor as consecutive rows of ``width`` elements, ``n`` rows at a time."""

    def __init__(self, data: TensorData, width: int, chunk_bytes: int) -> None:
        self.width = width
        self._chunks = data.iter_chunks(chunk_bytes)
        self._pending: list[np.ndarray] = []
        self._have = 0

    def take(self, n: int) -> np.ndarray:
        want = n * self.width
        while self._have < want:
            chunk = next(self._chunks).reshape(-1)
            self._pending.append(chunk)
            self._have += chunk.size
        flat = self._pending[0] if len(self._pending) == 1 else np.concatenate(self._pending)
        rest = flat[want:]
        self._pending = [rest] if rest.size else []
        self._have = rest.size
        return flat[:want].reshape(n, self.width)


def _rows_per_step(width: int, itemsize: int, max_bytes: int) -> int:
    return max(1, max_bytes // max(1, width * itemsize))


class AxisSliceData(TensorData):
    """``source[..., start:stop:step, ...]`` along ``axis``."""

    def __init__(self, source: TensorData, axis: int, start: int, stop: int, step: int = 1) -> None:
        if not 0 <= axis < len(source.shape) or step < 1:
            raise ValueError(f"cannot slice a tensor of shape {source.shape} on axis {axis} by {step}")
        self.source, self.axis, self.bounds = source, axis, slice(start, stop, step)
        self.dtype = source.dtype
        shape = list(source.shape)
        shape[axis] = len(range(*self.bounds.indices(source.shape[axis])))
        self.shape = tuple(shape)

    def raw(self) -> np.ndarray:
        index = [slice(None)] * len(self.shape)
        index[self.axis] = self.bounds
        return np.ascontiguousarray(self.source.raw()[tuple(index)])

    def iter_chunks(self, max_bytes: int = DEFAULT_CHUNK_BYTES) -> Iterator[np.ndarray]:
        outer = math.prod(self.source.shape[:self.axis])
        span, inner = self.source.shape[self.axis], math.prod(self.source.shape[self.axis + 1:])
        if not outer or not self.numel:
            return
        rows = _Rows(self.source, span * inner, max_bytes)
        step = _rows_per_step(span * inner, self.dtype.itemsize, max_bytes)
        for first in range(0, outer, step):
            n = min(step, outer - first)
            block = rows.take(n).reshape(n, span, inner)[:, self.bounds, :]
            yield np.ascontiguousarray(block).reshape(-1)

    def __repr__(self) -> str:
        return f"AxisSliceData({self.source!r}[axis {self.axis}: {self.bounds}])"


class JoinedData(TensorData):
    """``sources`` concatenated along ``axis`` (``stack=False``) or stacked on a new axis
    ``axis`` (``stack=True``); they share a dtype."""

    def __init__(self, sources: Sequence[TensorData], axis: int, *, stack: bool = False) -> None:
        if not sources:
            raise ValueError("nothing to join")
        self.sources, self.axis, self.stack = list(sources), axis, stack
        first = self.sources[0]
        self.dtype = first.dtype
        shapes = [list(s.shape) for s in self.sources]
        if stack:
            shapes = [s[:axis] + [1] + s[axis:] for s in shapes]
        for s, data in zip(shapes, self.sources):
            if data.dtype is not self.dtype or len(s) != len(shapes[0]) or \
                    any(a != b for i, (a, b) in enumerate(zip(s, shapes[0])) if i != axis):
                raise ValueError(f"cannot join tensors of shapes {[d.shape for d in self.sources]} "
                                 f"and dtypes {[str(d.dtype) for d in self.sources]} on axis {axis}")
        self._widths = [math.prod(s[axis:]) for s in shapes]
        out = list(shapes[0])
        out[axis] = sum(s[axis] for s in shapes)
        self.shape = tuple(out)

    def raw(self) -> np.ndarray:
        arrays = [s.raw() for s in self.sources]
        return np.stack(arrays, self.axis) if self.stack else np.concatenate(arrays, self.axis)

    def iter_chunks(self, max_bytes: int = DEFAULT_CHUNK_BYTES) -> Iterator[np.ndarray]:
        outer = math.prod(self.shape[:self.axis])
        if not self.numel:
            return
        if outer == 1:  # one after the other: each source's own chunks
            for s in self.sources:
                yield from s.iter_chunks(max_bytes)
            return
        readers = [_Rows(s, w, max_bytes) for s, w in zip(self.sources, self._widths)]
        step = _rows_per_step(sum(self._widths), self.dtype.itemsize, max_bytes)
        for first in range(0, outer, step):
            n = min(step, outer - first)
            yield np.concatenate([r.take(n) for r in readers], axis=1).reshape(-1)

    def __repr__(self) -> str:
        how = "stacked" if self.stack else "concatenated"
        return f"JoinedData({len(self.sources)} tensors {how} on axis {self.axis} → {list(self.shape)})"


class SwappedLastAxesData(TensorData):
    """``source`` with its last two axes swapped (each matrix of a stack transposed),
    made one matrix at a time."""

    def __init__(self, source: TensorData) -> None:
        if len(source.shape) < 2:
            raise ValueError(f"cannot swap the last two axes of a tensor of shape {source.shape}")
        self.source, self.dtype = source, source.dtype
        self.shape = (*source.shape[:-2], source.shape[-1], source.shape[-2])

    def raw(self) -> np.ndarray:
        return np.ascontiguousarray(np.swapaxes(self.source.raw(), -1, -2))

    def iter_chunks(self, max_bytes: int = DEFAULT_CHUNK_BYTES) -> Iterator[np.ndarray]:
        rows, cols = self.source.shape[-2:]
        if not self.numel:
            return
        matrices = _Rows(self.source, rows * cols, max_bytes)
        step = _rows_per_step(rows * cols, self.dtype.itemsize, max_bytes)
        count = math.prod(self.source.shape[:-2])
        for first in range(0, count, step):
            n = min(step, count - first)
            yield np.ascontiguousarray(matrices.take(n).reshape(n, rows, cols).swapaxes(1, 2)).reshape(-1)

    def __repr__(self) -> str:
        return f"SwappedLastAxesData({self.source!r})"


class ComputedData(TensorData):
    """``fn(*sources' arrays)``: for rearrangements that need their sources whole (a
    transpose, an interleave); each source is read when this one is."""

    def __init__(self, sources: Sequence[TensorData], fn: Callable[..., np.ndarray], shape: Sequence[int],
                 dtype: DType, description: str = "") -> None:
        self.sources, self.fn = list(sources), fn
        self.shape, self.dtype = tuple(int(d) for d in shape), dtype
        self.description = description

    def raw(self) -> np.ndarray:
        out = np.ascontiguousarray(self.fn(*(s.raw() for s in self.sources)))
        if tuple(out.shape) != self.shape or out.dtype != self.dtype.numpy:
            raise ValueError(f"{self.description or 'computed tensor'}: made {out.dtype}{list(out.shape)}, "
                             f"expected {self.dtype.numpy}{list(self.shape)}")
        return out

    def __repr__(self) -> str:
        return f"ComputedData({self.description} → {self.dtype}{list(self.shape)})"


__all__ = ["AxisSliceData", "ComputedData", "JoinedData", "SwappedLastAxesData"]
