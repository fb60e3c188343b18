"""Tensor data held by constant-like ops: numpy arrays or lazy handles to bytes.

The IR never holds a ``torch.Tensor``. Weights arrive as zero-copy numpy views of
the model's memory (:class:`ArrayData`) or as handles that read bytes on demand
(:class:`LazyData`), so that the graph stage holds references, not copies.
"""

from __future__ import annotations

import abc
import math
import os
from collections.abc import Callable, Iterator

import numpy as np

from t2n.ir.dtypes import DType

DEFAULT_CHUNK_BYTES = 64 << 20
"""Chunk size when streaming data: views of contiguous memory, copies of strided data."""

CONVERT_CHUNK_BYTES = 8 << 20
"""Chunk size when converting dtypes: small, so the temporaries stay in cache and memory."""


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    """Widen raw bf16 bits (uint16) to float32 values; exact."""
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def convert_raw(raw: np.ndarray, src: DType, dst: DType) -> np.ndarray:
    """Raw elements of ``src`` (bf16 as uint16 bits) converted to ``dst``'s raw form.

    Floats round to nearest even (bf16 → f16 is exact in f16's normal range; values
    beyond it become inf, tiny ones f16 subnormals); to bool is ``!= 0``. Converting
    to bf16 is not offered: nothing is ever written as bf16.
    """
    if src is dst:
        return raw
    if dst is DType.BF16:
        raise ValueError("conversion to bf16 is not supported (no format stores it)")
    values = bf16_bits_to_f32(raw) if src is DType.BF16 else raw
    if dst is DType.BOOL:
        return np.asarray(values != 0)
    with np.errstate(over="ignore", invalid="ignore"):
        return values.astype(dst.numpy)


class TensorData(abc.ABC):
    """Read-only tensor contents of a known dtype and static shape."""

    dtype: DType
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize

    @abc.abstractmethod
    def raw(self) -> np.ndarray:
        """The stored elements as a numpy array (bf16 as uint16 bits). May read from disk."""

    def values(self) -> np.ndarray:
        """The elements as numbers numpy computes with (bf16 widened to f32)."""
        raw = self.raw()
        return bf16_bits_to_f32(raw) if self.dtype is DType.BF16 else raw

    def iter_chunks(self, max_bytes: int = DEFAULT_CHUNK_BYTES) -> Iterator[np.ndarray]:
        """C-order 1-D chunks of the raw elements, each contiguous and at most ``max_bytes``.

        A contiguous source yields views of its own memory (no copy); a strided one
        is copied one bounded chunk at a time.
        """
        arr = self.raw()
        yield from chunks_of(arr, max_bytes)


def chunks_of(arr: np.ndarray, max_bytes: int) -> Iterator[np.ndarray]:
    if arr.size == 0:
        return
    per = max(1, max_bytes // max(1, arr.dtype.itemsize))
    if arr.flags.c_contiguous:
        flat = arr.reshape(-1)
        for start in range(0, flat.size, per):
            yield flat[start : start + per]
        return
    # Strided: copy whole leading-axis slabs that fit in the budget.
    if arr.ndim == 0:
        yield np.ascontiguousarray(arr).reshape(-1)
        return
    row = math.prod(arr.shape[1:]) or 1
    rows = max(1, per // row)
    if rows == 1 and row > per and arr.ndim > 1:
        for i in range(arr.shape[0]):
            yield from chunks_of(arr[i], max_bytes)
        return
    for start in range(0, arr.shape[0], rows):
        yield np.ascontiguousarray(arr[start : start + rows]).reshape(-1)


class ArrayData(TensorData):
    """Data backed by a numpy array, possibly a zero-copy view of a model's memory."""

    __slots__ = ("array", "dtype", "shape")

    def __init__(self, array: np.ndarray, dtype: DType | None = None) -> None:
        self.dtype = DType.from_numpy(array.dtype) if dtype is None else dtype
        symbolic = array.dtype == object and self.dtype.is_int
        if dtype is not None and array.dtype != dtype.numpy and not symbolic:
            raise TypeError(f"array of {array.dtype} cannot hold {dtype} data")
        self.array = array
        self.shape = tuple(int(d) for d in array.shape)

    def raw(self) -> np.ndarray:
        return self.array

    @property
    def is_symbolic(self) -> bool:
        """True for integer data holding symbolic dimensions (an object array)."""
        return self.array.dtype == object

    def __repr__(self) -> str:
        return f"ArrayData({self.dtype}{list(self.shape)})"


class FileStamp:
    """Which file, at which size and modification time: taken when a weight file is
    opened, compared before its bytes are read, so that a file truncated, rewritten or
    replaced (another inode) in between is refused instead of read as it is now."""

    __slots__ = ("dev", "ino", "mtime_ns", "size")

    def __init__(self, st: os.stat_result) -> None:
        self.dev, self.ino, self.size, self.mtime_ns = st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns

    def change(self, st: os.stat_result) -> str | None:
        """What differs in ``st`` (a stat of the file now), or None."""
        if (st.st_dev, st.st_ino) != (self.dev, self.ino):
            return "it was replaced by another file"
        if st.st_size < self.size:
            return f"it was truncated from {self.size} to {st.st_size} bytes"
        if st.st_size != self.size:
            return f"it grew from {self.size} to {st.st_size} bytes"
        if st.st_mtime_ns != self.mtime_ns:
            return "it was rewritten (its modification time changed)"
        return None


class FileRegion:
    """``nbytes`` bytes of the file at ``path`` from ``offset``: a tensor's little-endian
    bytes as they lie in a checkpoint, which writers copy file to file (in the kernel,
    where it can) instead of reading them into memory and writing them out again.
    ``stamp`` is the file as it was when opened; readers refuse it once it differs."""

    __slots__ = ("name", "nbytes", "offset", "path", "stamp")

    def __init__(self, path: str, offset: int, nbytes: int, stamp: FileStamp | None = None,
                 name: str = "") -> None:
        self.path, self.offset, self.nbytes = path, offset, nbytes
        self.stamp, self.name = stamp, name

    def __repr__(self) -> str:
        return f"FileRegion({self.path!r}, {self.offset}, {self.nbytes})"


def chunk_nbytes(chunk: object) -> int:
    """Bytes in a chunk of a streamed file: a buffer or a :class:`FileRegion`."""
    return chunk.nbytes if isinstance(chunk, FileRegion) else memoryview(chunk).nbytes  # type: ignore[arg-type]


class LazyData(TensorData):
    """Data read on demand, e.g. from a safetensors file or a memory-mapped checkpoint.

    ``load`` returns the whole array; ``chunks`` (optional) streams it in bounded
    pieces so that writing never holds more than one chunk. ``region`` (optional) is
    where its bytes lie in a file, little-endian and contiguous, as a ``.dat`` payload
    holds them.
    """

    def __init__(
        self,
        dtype: DType,
        shape: tuple[int, ...],
        load: Callable[[], np.ndarray],
        chunks: Callable[[int], Iterator[np.ndarray]] | None = None,
        description: str = "",
        region: FileRegion | None = None,
    ) -> None:
        self.dtype = dtype
        self.shape = tuple(int(d) for d in shape)
        self._load = load
        self._chunks = chunks
        self.description = description
        self.region = region

    def raw(self) -> np.ndarray:
        arr = self._load()
        if tuple(arr.shape) != self.shape:
            arr = arr.reshape(self.shape)
        return arr

    def iter_chunks(self, max_bytes: int = DEFAULT_CHUNK_BYTES) -> Iterator[np.ndarray]:
        if self._chunks is not None:
            yield from self._chunks(max_bytes)
        else:
            yield from chunks_of(self.raw(), max_bytes)

    def __repr__(self) -> str:
        return f"LazyData({self.dtype}{list(self.shape)} {self.description})"


class ConvertedData(TensorData):
    """``source`` seen as another dtype, converted only when read, chunk by chunk.

    Used for bf16 weights exported as f16/f32 (and for checkpoints whose dtype differs
    from the model's): the graph keeps a reference to the bf16 data, and writing
    converts one bounded chunk at a time, so no converted copy of the whole tensor
    ever exists.
    """

    __slots__ = ("dtype", "shape", "source")

    def __init__(self, source: TensorData, dtype: DType) -> None:
        if dtype is DType.BF16 and source.dtype is not DType.BF16:
            raise ValueError("conversion to bf16 is not supported (no format stores it)")
        self.source = source
        self.dtype = dtype
        self.shape = source.shape

    def raw(self) -> np.ndarray:
        return convert_raw(self.source.raw(), self.source.dtype, self.dtype)

    def iter_chunks(self, max_bytes: int = DEFAULT_CHUNK_BYTES) -> Iterator[np.ndarray]:
        budget = min(max_bytes, CONVERT_CHUNK_BYTES)
        widest = max(self.source.dtype.itemsize, self.dtype.itemsize)
        per_source = max(1, budget * self.source.dtype.itemsize // widest)
        for chunk in self.source.iter_chunks(per_source):
            yield convert_raw(chunk, self.source.dtype, self.dtype)

    def __repr__(self) -> str:
        return f"ConvertedData({self.dtype} from {self.source!r})"


def converted(data: TensorData, dtype: DType) -> TensorData:
    """``data`` as ``dtype``: itself when the dtype already matches, else a lazy conversion."""
    return data if data.dtype is dtype else ConvertedData(data, dtype)
