"""The NNEF ``.dat`` tensor format: a 128-byte header, then little-endian C-order data.

Writing streams the tensor's own memory to the file: a zero-copy view for
contiguous data, bounded chunks where a copy or a dtype conversion is needed
(dtype conversions use torch's vectorized kernels when torch is already loaded,
numpy otherwise; both round to nearest even and give the same bytes).
Reading validates every header field against the payload and rejects anything
it cannot prove correct.

The payload size is a 32-bit field: a tensor whose payload exceeds 4 GiB - 1 is
refused with :class:`TensorTooLargeError` before anything is written.
"""

from __future__ import annotations

import enum
import io
import itertools
import math
import os
import struct
import sys
from collections.abc import Callable, Iterator
from typing import BinaryIO

import numpy as np

from t2n.errors import CorruptTensorFileError, SerializationError, TensorTooLargeError
from t2n.ir import ArrayData, DType, LazyData, TensorData
from t2n.ir.tensor_data import (
    CONVERT_CHUNK_BYTES,
    DEFAULT_CHUNK_BYTES,
    ConvertedData,
    FileRegion,
    convert_raw,
)
from t2n.quant import q4_0
from t2n.serialize.filecheck import array_guard, bad_address_error, is_bad_address

HEADER_SIZE = 128
MAGIC = b"\x4e\xef"
MAX_RANK = 8
MAX_PAYLOAD = 2**32 - 1
VARIABLE_BITS = 0xFFFFFFFF


class ItemCode(enum.IntEnum):
    """Khronos item-type codes (vendor 0)."""

    FLOAT = 0
    UINT = 1
    QUINT = 2
    QINT = 3
    INT = 4
    BOOL = 5


def item_type(dtype: DType) -> tuple[int, int]:
    """(code, bits) written for ``dtype``: standard Khronos codes, which tract reads too."""
    if dtype is DType.BF16:
        raise SerializationError(
            "bf16 has no .dat item type in NNEF or tract; write it as f16 or f32 "
            "(export_tensors_to_nnef(..., bf16_as=...)); compile and export convert bf16 tensors "
            "themselves (the target's bf16_as), so from them this is a t2n bug: please report it"
        )
    if dtype.is_float:
        return ItemCode.FLOAT, dtype.bits
    if dtype is DType.BOOL:
        return ItemCode.BOOL, 1
    return (ItemCode.INT if dtype.is_signed else ItemCode.UINT), dtype.bits


_FROM_ITEM: dict[tuple[int, int, bool], DType] = {}
for _dt in DType:
    if _dt is DType.BF16 or _dt is DType.BOOL:
        continue
    if _dt.is_float:
        _FROM_ITEM[(ItemCode.FLOAT, _dt.bits, True)] = _dt
    else:
        for _code in ((ItemCode.INT, ItemCode.QINT) if _dt.is_signed else (ItemCode.UINT, ItemCode.QUINT)):
            _FROM_ITEM[(_code, _dt.bits, _dt.is_signed)] = _dt


def payload_size(dtype: DType, shape: tuple[int, ...]) -> int:
    count = math.prod(shape)
    _, bits = item_type(dtype)
    return (count * bits + 7) // 8


def make_header(dtype: DType, shape: tuple[int, ...]) -> bytes:
    """The 128-byte header for a tensor; refuses what the format cannot hold."""
    if len(shape) > MAX_RANK:
        raise SerializationError(f".dat tensors have rank <= {MAX_RANK}, got shape {list(shape)}")
    if any(d < 0 or d > 0xFFFFFFFF for d in shape):
        raise SerializationError(f"dimension out of range for .dat in shape {list(shape)}")
    size = payload_size(dtype, shape)
    if size > MAX_PAYLOAD:
        raise TensorTooLargeError(
            f"tensor of shape {list(shape)} ({dtype}) needs {size} bytes; the .dat header "
            f"stores the payload size in 32 bits (at most 4 GiB - 1). Split the tensor "
            f"(e.g. per layer or per vocabulary shard) or store it in a lower precision."
        )
    code, bits = item_type(dtype)
    extents = list(shape) + [0] * (MAX_RANK - len(shape))
    header = MAGIC + bytes([1, 0]) + struct.pack("<II", size, len(shape))
    header += struct.pack(f"<{MAX_RANK}I", *extents)
    header += struct.pack("<II", bits, code)
    return header + bytes(HEADER_SIZE - len(header))


def _as_le(arr: np.ndarray) -> np.ndarray:
    if arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and sys.byteorder == "big"):
        return arr.astype(arr.dtype.newbyteorder("<"))
    return arr


Converter = Callable[[np.ndarray, DType, DType], np.ndarray]


def chunk_converter() -> Converter:
    """The dtype converter for payload chunks: torch's kernels (several times faster than
    numpy's for f32/bf16 → f16) when torch is already imported, else numpy. Never
    imports torch itself."""
    if "torch" in sys.modules:
        from t2n.quant.parallel import convert_chunk

        return convert_chunk
    return convert_raw


def _conversion_chain(data: TensorData, out: DType) -> tuple[TensorData, list[DType]]:
    """The data under any :class:`ConvertedData` layers, and the dtypes it goes through
    on its way to ``out`` (its own first), so conversions run on chunks read once."""
    steps = [out]
    while isinstance(data, ConvertedData):
        if data.dtype is not steps[-1]:
            steps.append(data.dtype)
        data = data.source
    if data.dtype is not steps[-1]:
        steps.append(data.dtype)
    steps.reverse()
    # bf16 → f32 is exact: bf16 → f32 → f16 is bf16 → f16 in one (fast) step.
    if len(steps) == 3 and steps[0] is DType.BF16 and steps[1] is DType.F32:
        steps.pop(1)
    return data, steps


def _source_chunks(data: TensorData, chunk_bytes: int, name: str) -> Iterator[np.ndarray]:
    """Chunks of ``data``; an array viewing a memory-mapped file is checked before each
    one is touched (see :mod:`t2n.serialize.filecheck`)."""
    guard = array_guard(data.array, f"tensor {name!r}" if name else "") \
        if isinstance(data, ArrayData) else None
    if guard is None:
        yield from data.iter_chunks(chunk_bytes)
        return
    guard(None)  # a non-contiguous source is checked before its first copy
    for chunk in data.iter_chunks(chunk_bytes):
        guard(chunk)
        yield chunk


def iter_payload(
    data: TensorData, dtype: DType | None = None, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    *, name: str = "",
) -> Iterator[memoryview]:
    """Payload bytes of ``data`` written as ``dtype`` (default: its own), in chunks.

    Contiguous data in its own dtype yields views of its memory (no copy); a
    conversion (bf16 → f16, …) is done on small chunks, so no converted copy of the
    whole tensor exists. :class:`ConvertedData` layers are unwrapped and converted here,
    on chunks of the data they wrap. ``name`` names the tensor in errors.
    """
    out = data.dtype if dtype is None else dtype
    data, steps = _conversion_chain(data, out)
    convert = chunk_converter() if len(steps) > 1 else None
    if convert is not None:
        widest = max(d.itemsize for d in steps)
        chunk_bytes = max(1, min(chunk_bytes, CONVERT_CHUNK_BYTES) * data.dtype.itemsize // widest)

    def converted(chunk: np.ndarray) -> np.ndarray:
        if convert is not None:
            for src, dst in zip(steps, steps[1:]):
                chunk = convert(chunk, src, dst)
        return chunk

    chunks = _source_chunks(data, chunk_bytes, name)
    if out is DType.BOOL:
        # Pack 8 elements per byte: keep chunk lengths multiples of 8 until the last.
        pending = np.zeros(0, dtype=bool)
        for chunk in chunks:
            bits = converted(chunk).astype(bool, copy=False)
            if pending.size:
                bits = np.concatenate([pending, bits])
            cut = bits.size - bits.size % 8
            if cut:
                yield np.packbits(bits[:cut]).data
            pending = bits[cut:]
        if pending.size:
            yield np.packbits(pending).data
        return
    for chunk in chunks:
        yield np.ascontiguousarray(_as_le(converted(chunk))).data.cast("B")


def write_dat(
    target: str | os.PathLike[str] | BinaryIO,
    data: TensorData | np.ndarray,
    dtype: DType | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    *,
    sync: bool = False,
) -> int:
    """Write one tensor as a ``.dat`` file (path or open binary file); returns bytes written.

    A path is written in place (see :mod:`t2n.serialize.tensors` and the archive
    writers for atomic forms); ``sync=True`` flushes it to the disk before returning.
    """
    src = ArrayData(data) if isinstance(data, np.ndarray) else data
    chunks = iter_dat(src, dtype, chunk_bytes)  # the header is made (and checked) now
    if isinstance(target, (str, os.PathLike)):
        with open(target, "wb") as f:
            n = _write_to(f, chunks)
            if sync:
                f.flush()
                os.fsync(f.fileno())
            return n
    return _write_to(target, chunks)


def dat_size(data: TensorData, dtype: DType | None = None) -> int:
    """Size in bytes of the ``.dat`` file for ``data`` written as ``dtype``."""
    if _is_q4_0(data):
        return HEADER_SIZE + q4_0.payload_size(data.shape)
    return HEADER_SIZE + payload_size(data.dtype if dtype is None else dtype, data.shape)


def iter_dat(data: TensorData, dtype: DType | None = None,
             chunk_bytes: int = DEFAULT_CHUNK_BYTES, *,
             regions: bool = False, name: str = "") -> Iterator[bytes | memoryview | FileRegion]:
    """The whole ``.dat`` file as chunks: the header, then the payload (for archives).

    The header is made now, so a tensor the format cannot hold is refused when this is
    called, before any byte is produced. With ``regions``, a payload that lies as it is
    in a file (a safetensors tensor written in its own dtype) is one
    :class:`~t2n.ir.tensor_data.FileRegion` chunk, which the archive writers copy file to
    file; only consumers that handle those ask for them. ``name`` names the tensor in
    errors (e.g. its weight file changed under it).
    """
    if _is_q4_0(data):
        return itertools.chain([q4_0.header(data.shape)], q4_0.iter_payload(data))
    out = data.dtype if dtype is None else dtype
    header = make_header(out, data.shape)
    region = data.region if isinstance(data, LazyData) else None
    if regions and region is not None and out is data.dtype and out is not DType.BOOL \
            and region.nbytes == payload_size(out, data.shape):
        return iter([header, region])
    return itertools.chain([header], iter_payload(data, dtype, chunk_bytes, name=name))


def _is_q4_0(data: TensorData) -> bool:
    """Q4_0 weights (:class:`t2n.quant.q4_0.Q40Data`, ``Q40Blocks``) are written as tract's
    4-bit blocks, whatever dtype is asked: their values are the blocks' values in any
    float type."""
    return q4_0.is_q4_0(data)


def _write_to(f: BinaryIO, chunks: Iterator[bytes | memoryview | FileRegion]) -> int:
    n = 0
    for chunk in chunks:
        assert not isinstance(chunk, FileRegion)  # asked without regions
        try:
            n += f.write(chunk)
        except OSError as exc:
            if is_bad_address(exc):
                raise bad_address_error(exc, "a tensor") from exc
            raise
    return n


def parse_header(header: bytes, source: str = "<bytes>") -> tuple[DType, tuple[int, ...], int]:
    """Validate a header; returns (dtype, shape, bits per item)."""
    if len(header) < HEADER_SIZE:
        raise CorruptTensorFileError(f"{source}: {len(header)} bytes is shorter than the 128-byte header")
    if header[:2] != MAGIC:
        raise CorruptTensorFileError(f"{source}: wrong magic {header[:2].hex()} (expected 4eef)")
    major, minor = header[2], header[3]
    if major != 1:
        raise CorruptTensorFileError(f"{source}: unsupported .dat version {major}.{minor}")
    size, rank = struct.unpack_from("<II", header, 4)
    if rank > MAX_RANK:
        raise CorruptTensorFileError(f"{source}: rank {rank} is over the maximum of {MAX_RANK}")
    extents = struct.unpack_from(f"<{MAX_RANK}I", header, 12)
    if any(extents[rank:]):
        raise CorruptTensorFileError(f"{source}: nonzero extents past rank {rank}")
    bits, item = struct.unpack_from("<II", header, 44)
    code, vendor = item & 0xFFFF, item >> 16
    shape = tuple(int(d) for d in extents[:rank])
    if vendor != 0:
        raise CorruptTensorFileError(
            f"{source}: vendor item type 0x{item:08x} is not readable here (only standard types)"
        )
    if code == ItemCode.BOOL:
        if bits not in (1, 8):
            raise CorruptTensorFileError(f"{source}: bool with {bits} bits per item")
        dtype = DType.BOOL
    else:
        found = _FROM_ITEM.get((code, bits, code != ItemCode.UINT and code != ItemCode.QUINT))
        if found is None:
            raise CorruptTensorFileError(f"{source}: unknown item type code {code} with {bits} bits")
        dtype = found
    expected = (math.prod(shape) * bits + 7) // 8
    if size != expected:
        raise CorruptTensorFileError(
            f"{source}: header says {size} payload bytes but shape {list(shape)} at {bits} bits needs {expected}"
        )
    return dtype, shape, bits


def read_dat_header(path: str | os.PathLike[str]) -> tuple[DType, tuple[int, ...]]:
    """(dtype, shape) of a ``.dat`` file, reading only its header; the file size must
    agree with it."""
    with open(path, "rb") as f:
        header = f.read(HEADER_SIZE)
        size = os.fstat(f.fileno()).st_size
    dtype, shape, _ = parse_header(header, str(path))
    _check_payload_length(size - HEADER_SIZE, struct.unpack_from("<I", header, 4)[0], str(path))
    return dtype, shape


def _check_payload_length(have: int, size: int, name: str) -> None:
    if have < size:
        raise CorruptTensorFileError(f"{name}: truncated: {have} of {size} payload bytes")
    if have > size:
        raise CorruptTensorFileError(f"{name}: {have - size} bytes past the declared payload")


def read_dat(source: str | os.PathLike[str] | bytes | BinaryIO) -> np.ndarray:
    """Read a ``.dat`` tensor; raises CorruptTensorFileError on any inconsistency."""
    name = str(source) if isinstance(source, (str, os.PathLike)) else "<bytes>"
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            blob = f.read()
    elif isinstance(source, (bytes, bytearray, memoryview)):
        blob = source
    else:
        blob = source.read()
    view = memoryview(blob).cast("B")
    if q4_0.is_q4_0_header(bytes(view[:HEADER_SIZE])):
        return q4_0.dequantize_blocks(*q4_0.parse_blocks(view, name))
    dtype, shape, bits = parse_header(bytes(view[:HEADER_SIZE]), name)
    size = struct.unpack_from("<I", view, 4)[0]
    payload = view[HEADER_SIZE:]
    _check_payload_length(len(payload), size, name)
    count = math.prod(shape)
    if dtype is DType.BOOL:
        if bits == 1:
            arr = np.unpackbits(np.frombuffer(payload, dtype=np.uint8), count=count).astype(bool)
        else:
            arr = np.frombuffer(payload, dtype=np.uint8) != 0
    else:
        arr = np.frombuffer(payload, dtype=np.dtype(dtype.numpy).newbyteorder("<"))
        arr = arr.astype(dtype.numpy, copy=False)
    return arr.reshape(shape)


def dat_bytes(data: TensorData | np.ndarray, dtype: DType | None = None) -> bytes:
    """A whole ``.dat`` file in memory (for small tensors and tests)."""
    buf = io.BytesIO()
    write_dat(buf, data, dtype)
    return buf.getvalue()
