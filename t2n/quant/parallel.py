"""Work spread over the CPUs, results in order, memory bounded.

Quantizing is compute-bound while reading a checkpoint and writing an archive are not:
:func:`ordered_map` computes item ``k + 1`` (and a few more) on worker threads while the
caller reads item ``k + 2`` and writes result ``k`` (numpy and PyTorch release the GIL in
their kernels). The workers run PyTorch's kernels in their own thread: PyTorch's intra-op
pool, asked for from several threads at once on a machine whose cores are busy, is many
times slower than one thread per kernel (measured: 200 vs 4 ns per value).
"""

from __future__ import annotations

import os
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import numpy as np

from t2n.ir import DType, TensorData
from t2n.ir.tensor_data import convert_raw

T = TypeVar("T")
R = TypeVar("R")

AHEAD = 2
"""Items in flight per worker: enough to keep every worker busy, few enough to bound memory."""
CONVERT_BYTES = 4 << 20
"""Source bytes converted by a worker at a time."""
_FLOATS = (DType.F32, DType.F16, DType.BF16)
_SOURCE_FLOATS = (*_FLOATS, DType.F64)
_TARGET_FLOATS = (DType.F32, DType.F16, DType.F64)


def default_workers() -> int:
    """One worker per CPU this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _one_torch_thread() -> None:
    """Worker initializer: PyTorch kernels called from this thread run in it alone."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def ordered_map(fn: Callable[[T], R], items: Iterable[T], workers: int | None = None) -> Iterator[R]:
    """``fn(item)`` for each item, computed on ``workers`` threads (default: one per CPU)
    at most ``AHEAD`` items per worker ahead of the consumer, yielded in the items' order.
    An exception in ``fn`` is raised here, at its item; items not yet started are dropped.
    The caller's own PyTorch thread count is the same afterwards."""
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else 0
    count = workers or default_workers()
    pool = ThreadPoolExecutor(count, thread_name_prefix="t2n-quant", initializer=_one_torch_thread)
    pending: deque[Future[R]] = deque()
    try:
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) > AHEAD * count:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True)
        if torch is not None:
            # set_num_threads in a worker also changes the default of threads started
            # later: give it back the caller's count (which it left alone).
            torch.set_num_threads(threads)


def convert_chunk(raw: np.ndarray, src: DType, dst: DType) -> np.ndarray:
    """:func:`~t2n.ir.tensor_data.convert_raw` with PyTorch's kernel between floats when
    torch is already imported (several times faster than numpy's to f16; same bytes);
    numpy otherwise. Never imports torch. The one chunk converter of the ``.dat`` writer
    and of :class:`ConvertedOnWorkers`."""
    torch = sys.modules.get("torch")
    if (torch is None or src not in _SOURCE_FLOATS or dst not in _TARGET_FLOATS or src is dst
            or not raw.dtype.isnative):
        return convert_raw(raw, src, dst)
    flat = np.require(raw.reshape(-1), requirements=["C", "W"])
    source = torch.from_numpy(flat.view(np.int16)).view(torch.bfloat16) if src is DType.BF16 \
        else torch.from_numpy(flat)
    out = np.empty(flat.size, dst.numpy)
    torch.from_numpy(out).copy_(source)
    return out.reshape(raw.shape)


class ConvertedOnWorkers(TensorData):
    """Float ``source`` seen as float ``dtype`` (f32 or f16), converted chunk by chunk on
    the workers of :func:`ordered_map` while the consumer writes the chunks before: a
    checkpoint's f32 weights written into an f16 artifact at the speed of the disk."""

    def __init__(self, source: TensorData, dtype: DType) -> None:
        if source.dtype not in _FLOATS or dtype not in (DType.F32, DType.F16):
            raise ValueError(f"ConvertedOnWorkers converts floats to f32/f16, not {source.dtype} to {dtype}")
        self.source = source
        self.dtype = dtype
        self.shape = source.shape

    def raw(self) -> np.ndarray:
        return convert_chunk(self.source.raw(), self.source.dtype, self.dtype)

    def iter_chunks(self, max_bytes: int = CONVERT_BYTES) -> Iterator[np.ndarray]:
        src, dst = self.source.dtype, self.dtype
        per = max(src.itemsize, min(CONVERT_BYTES, max_bytes * src.itemsize // dst.itemsize))
        chunks = self.source.iter_chunks(per - per % src.itemsize)
        yield from ordered_map(lambda chunk: convert_chunk(chunk, src, dst), chunks)

    def __repr__(self) -> str:
        return f"ConvertedOnWorkers({self.dtype} from {self.source!r})"


__all__ = ["ConvertedOnWorkers", "convert_chunk", "default_workers", "ordered_map"]
