"""Q4_0 weights: tract's 4-bit blocks (the GGML/GGUF ``block_q4_0`` layout).

A Q4_0 tensor of shape ``[m, ...]`` is read as ``m`` rows of ``k = prod(shape[1:])``
values, ``k`` a multiple of 32. Each run of 32 consecutive values of a row is one
18-byte block: an f16 scale ``d``, then 16 bytes whose byte ``j`` holds element ``j``
in its low nibble and element ``j + 16`` in its high nibble. The value of code ``q``
(0..15) is ``(q - 8) * d``. In a ``.dat`` file the item type is code ``0x3040`` of
vendor ``0x5452`` ("TR"), bits ``0xFFFFFFFF``, payload ``m * k / 32 * 18`` bytes.

A quantized model keeps its weights as the dequantized values (what PyTorch computes
with) plus one f16 scale per block; the writer re-derives the codes from the weight's
own memory, chunk by chunk, and proves on the way that every value is exactly
``(q - 8) * d`` (rounded to the weight's dtype). So no 4-bit copy of the model is held,
and a weight changed after quantization is refused instead of written wrong.
Torch-free: the IR and the writers use this module.
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np

from t2n.errors import CorruptTensorFileError, InvalidArgumentError, SerializationError
from t2n.ir import DType, LazyData, TensorData
from t2n.ir.tensor_data import DEFAULT_CHUNK_BYTES
from t2n.quant import q4_0_kernel as kernel
from t2n.quant.q4_0_stream import RUN_BYTES, QuantizedOnRead, checked_blocks

BLOCK = 32
"""Values per block."""
BLOCK_BYTES = 18
"""Bytes per block: an f16 scale and 16 bytes of nibbles."""
ITEM_CODE = 0x3040
VENDOR = 0x5452
ITEM_TYPE = (VENDOR << 16) | ITEM_CODE
VARIABLE_BITS = 0xFFFFFFFF
FLOATS = (DType.F32, DType.F16, DType.BF16)


def shape_problem(shape: tuple[int, ...]) -> str | None:
    """Why a tensor of ``shape`` cannot be stored as Q4_0 (None when it can)."""
    if len(shape) < 2:
        return f"it has rank {len(shape)} (Q4_0 needs rank >= 2: rows of blocks)"
    row = math.prod(shape[1:])
    if row == 0 or shape[0] == 0:
        return f"shape {list(shape)} is empty"
    if row % BLOCK:
        return (f"its rows hold {row} values (shape {list(shape)}), which do not split into "
                f"blocks of {BLOCK}")
    return None


def payload_size(shape: tuple[int, ...]) -> int:
    """Bytes of the Q4_0 payload of a tensor of ``shape``."""
    return math.prod(shape) // BLOCK * BLOCK_BYTES


# -- the codes ------------------------------------------------------------------------


_f32 = kernel.f32


def codes_for(values: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """The codes (uint8, 0..15) of ``values`` ``[n, 32]`` (f32) at the f16 ``scales`` ``[n]``:
    ``floor(value / d + 8.5)`` clamped to 0..15 (8 in a block of scale 0)."""
    _, inverse = kernel.inverses(scales)
    values = np.ascontiguousarray(values, dtype=np.float32)
    half = kernel.codes(values, inverse)
    return np.ascontiguousarray(half.transpose(1, 0, 2)).reshape(-1, BLOCK)


def scale_sources(values: np.ndarray, percentile: float = 1.0) -> np.ndarray:
    """Per block of ``values`` ``[n, 32]`` (f32), the signed value its scale maps to code
    0 (see :mod:`t2n.quant.recipes`): of the block's largest and smallest value, the one
    of larger magnitude (the largest on a tie); with ``percentile`` < 1, that quantile of
    the magnitudes, signed like it."""
    high, low = values.max(axis=1), values.min(axis=1)
    top = np.where(high >= -low, high, low)
    if percentile >= 1.0:
        return np.asarray(top)
    mags = np.quantile(np.abs(values), percentile, axis=1).astype(np.float32)
    return np.asarray(mags * np.where(top < 0, np.float32(-1), np.float32(1)))


def quantize_blocks_(values: np.ndarray, percentile: float = 1.0) -> np.ndarray:
    """Replace ``values`` ``[n, 32]`` (f32, in place) by their Q4_0 values; returns the f16
    scales. Codes: ``floor(value / d + 8.5)`` clamped to 0..15, ``d`` the stored scale."""
    return kernel.quantize_values_(values, percentile)


def dequantize_codes(codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """``(q - 8) * d`` in f32 (exact: an f16 times a small integer)."""
    return np.asarray((codes.astype(np.float32) - np.float32(8)) * _f32(scales)[..., None])


def pack(codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Blocks ``[n, 18]`` (uint8) from codes ``[n, 32]`` and f16 scales ``[n]``."""
    out = np.empty((codes.shape[0], BLOCK_BYTES), dtype=np.uint8)
    out[:, :2] = np.ascontiguousarray(scales, dtype="<f2").view(np.uint8).reshape(-1, 2)
    np.bitwise_or(codes[:, :16], codes[:, 16:] << np.uint8(4), out=out[:, 2:])
    return out


def unpack(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes ``[n, 32]`` uint8, scales ``[n]`` f16) of blocks ``[n, 18]``."""
    blocks = np.asarray(blocks, dtype=np.uint8).reshape(-1, BLOCK_BYTES)
    scales = np.ascontiguousarray(blocks[:, :2]).view("<f2").reshape(-1).astype(np.float16)
    nib = blocks[:, 2:]
    codes = np.concatenate([nib & np.uint8(0x0F), nib >> np.uint8(4)], axis=1)
    return codes, scales


def dequantize_blocks(blocks: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The f32 values that Q4_0 blocks stand for, as an array of ``shape``."""
    codes, scales = unpack(blocks)
    return dequantize_codes(codes, scales).reshape(shape)


# -- the IR data ----------------------------------------------------------------------


class Q40Data(TensorData):
    """A float weight that is written as Q4_0 blocks.

    ``source`` is the weight as the model holds it (its dequantized values, so constant
    folding and PyTorch see the same numbers); ``scales`` ``[m, k / 32]`` (f16) are the
    blocks' scales. :func:`iter_blocks` derives the codes from ``source`` chunk by chunk.
    """

    __slots__ = ("dtype", "name", "scales", "shape", "source")

    def __init__(self, source: TensorData, scales: np.ndarray, name: str = "") -> None:
        problem = shape_problem(source.shape)
        if problem is not None:
            raise InvalidArgumentError(f"tensor {name!r} cannot be stored as Q4_0: {problem}")
        if source.dtype not in FLOATS:
            raise InvalidArgumentError(
                f"tensor {name!r} cannot be stored as Q4_0: it holds {source.dtype}, not floats")
        blocks = math.prod(source.shape) // BLOCK
        if scales.dtype != np.float16 or scales.size != blocks:
            raise InvalidArgumentError(
                f"tensor {name!r}: Q4_0 needs {blocks} f16 scales, got {scales.size} of {scales.dtype}")
        self.source = source
        self.scales = scales.reshape(-1)
        self.name = name
        self.dtype = source.dtype
        self.shape = source.shape

    def raw(self) -> np.ndarray:
        return self.source.raw()

    def iter_chunks(self, max_bytes: int = DEFAULT_CHUNK_BYTES) -> Iterator[np.ndarray]:
        yield from self.source.iter_chunks(max_bytes)

    @property
    def q4_0_nbytes(self) -> int:
        return payload_size(self.shape)

    def __repr__(self) -> str:
        return f"Q40Data({self.dtype}{list(self.shape)} {self.name})"


class Q40Blocks(TensorData):
    """Q4_0 blocks as they already are (e.g. a GGUF file's ``Q4_0`` tensor, memory-mapped):
    written to the ``.dat`` payload byte for byte, never re-quantized. Its values (for
    anything that reads them) are the blocks' f32 values, decoded chunk by chunk."""

    __slots__ = ("blocks", "dtype", "name", "shape")

    def __init__(self, blocks: np.ndarray, shape: tuple[int, ...], name: str = "") -> None:
        problem = shape_problem(shape)
        if problem is not None:
            raise InvalidArgumentError(f"tensor {name!r} cannot be stored as Q4_0: {problem}")
        want = math.prod(shape) // BLOCK
        if blocks.dtype != np.uint8 or blocks.size != want * BLOCK_BYTES:
            raise InvalidArgumentError(
                f"tensor {name!r}: shape {list(shape)} needs {want} Q4_0 blocks "
                f"({want * BLOCK_BYTES} bytes), got {blocks.size} {blocks.dtype} items")
        self.blocks = blocks.reshape(want, BLOCK_BYTES)
        self.shape = tuple(int(d) for d in shape)
        self.dtype = DType.F32
        self.name = name

    def raw(self) -> np.ndarray:
        return dequantize_blocks(self.blocks, self.shape)

    def iter_chunks(self, max_bytes: int = DEFAULT_CHUNK_BYTES) -> Iterator[np.ndarray]:
        per = max(1, max_bytes // (BLOCK * 4))
        for start in range(0, self.blocks.shape[0], per):
            codes, scales = unpack(self.blocks[start:start + per])
            yield dequantize_codes(codes, scales).reshape(-1)

    def __repr__(self) -> str:
        return f"Q40Blocks({list(self.shape)} {self.name})"


def iter_payload(data: TensorData) -> Iterator[memoryview]:
    """The Q4_0 payload of :class:`Q40Data` (packed now) or :class:`Q40Blocks` (as is)."""
    if isinstance(data, Q40Blocks):
        per = DEFAULT_CHUNK_BYTES // BLOCK_BYTES
        for start in range(0, data.blocks.shape[0], per):
            yield np.ascontiguousarray(data.blocks[start:start + per]).data.cast("B")
        return
    assert isinstance(data, Q40Data)
    yield from iter_blocks(data)


def as_float(data: TensorData) -> TensorData:
    """The float values of Q4_0 data, as data written in float (its own dtype)."""
    if isinstance(data, Q40Data):
        return data.source
    if isinstance(data, Q40Blocks):
        return LazyData(DType.F32, data.shape, data.raw, data.iter_chunks, f"values of {data!r}")
    return data


def is_q4_0(data: TensorData) -> bool:
    """True for tensor data written as Q4_0 blocks."""
    return isinstance(data, (Q40Data, Q40Blocks))


def iter_blocks(data: Q40Data, chunk_bytes: int = RUN_BYTES, *,
                threads: int | None = None) -> Iterator[memoryview]:
    """The Q4_0 payload of ``data``, ``chunk_bytes`` of the source at a time, packed by
    ``threads`` threads (default: one per CPU) a few chunks ahead of the consumer, in
    order. A source quantized as it is read (:class:`QuantizedOnRead`, a streamed
    checkpoint) gives its blocks from one pass over its values; any other is refused
    with :class:`InvalidArgumentError` naming it where its values are not its blocks'
    values (it was changed after quantization)."""
    source = data.source
    if isinstance(source, QuantizedOnRead) and np.shares_memory(source.scales, data.scales):
        yield from source.iter_blocks()
        return
    yield from checked_blocks(source, data.scales, data.name, run_bytes=chunk_bytes, workers=threads)


# -- .dat files -----------------------------------------------------------------------


def header(shape: tuple[int, ...]) -> bytes:
    """The 128-byte ``.dat`` header of a Q4_0 tensor."""
    problem = shape_problem(shape)
    if problem is not None:
        raise InvalidArgumentError(f"no Q4_0 .dat for shape {list(shape)}: {problem}")
    size = payload_size(shape)
    if size > 0xFFFFFFFF or len(shape) > 8:
        raise SerializationError(f"a Q4_0 tensor of shape {list(shape)} does not fit a .dat header")
    extents = list(shape) + [0] * (8 - len(shape))
    head = b"\x4e\xef\x01\x00" + struct.pack("<II", size, len(shape))
    head += struct.pack("<8I", *extents) + struct.pack("<II", VARIABLE_BITS, ITEM_TYPE)
    return head + bytes(128 - len(head))


def is_q4_0_header(head: bytes) -> bool:
    """True when a ``.dat`` header declares Q4_0 blocks (item type and variable bits)."""
    return len(head) >= 52 and struct.unpack_from("<II", head, 44) == (VARIABLE_BITS, ITEM_TYPE)


def parse_blocks(blob: bytes | memoryview, source: str = "<bytes>") -> tuple[np.ndarray, tuple[int, ...]]:
    """(blocks ``[n, 18]``, shape) of a whole Q4_0 ``.dat`` file; every inconsistency
    (truncation, wrong sizes, bad extents, NaN/inf scales) is a
    :class:`CorruptTensorFileError` naming ``source``."""
    view = memoryview(blob).cast("B")
    if len(view) < 128 or bytes(view[:2]) != b"\x4e\xef" or view[2] != 1:
        raise CorruptTensorFileError(f"{source}: not a .dat file (bad or short header)")
    size, rank = struct.unpack_from("<II", view, 4)
    extents = struct.unpack_from("<8I", view, 12)
    bits, item = struct.unpack_from("<II", view, 44)
    if item != ITEM_TYPE or bits != VARIABLE_BITS:
        raise CorruptTensorFileError(f"{source}: item type 0x{item:08x} with {bits} bits is not Q4_0")
    if rank > 8 or any(extents[rank:]):
        raise CorruptTensorFileError(f"{source}: bad rank {rank} or extents {list(extents)}")
    shape = tuple(int(d) for d in extents[:rank])
    problem = shape_problem(shape)
    if problem is not None:
        raise CorruptTensorFileError(f"{source}: a Q4_0 tensor of shape {list(shape)}: {problem}")
    if size != payload_size(shape):
        raise CorruptTensorFileError(
            f"{source}: header says {size} payload bytes but Q4_0 shape {list(shape)} needs "
            f"{payload_size(shape)}")
    have = len(view) - 128
    if have != size:
        what = "truncated" if have < size else "longer than declared"
        raise CorruptTensorFileError(f"{source}: {what}: {have} of {size} payload bytes")
    blocks = np.frombuffer(view[128:], dtype=np.uint8).reshape(-1, BLOCK_BYTES)
    scales = np.ascontiguousarray(blocks[:, :2]).view("<f2")
    if not np.isfinite(scales).all():
        raise CorruptTensorFileError(f"{source}: a Q4_0 block has a NaN or infinite scale")
    return blocks, shape


def read_blocks(source: str | os.PathLike[str] | bytes | BinaryIO) -> tuple[np.ndarray, tuple[int, ...]]:
    """(blocks, shape) of a Q4_0 ``.dat`` file (a path, its bytes or an open file)."""
    name = str(source) if isinstance(source, (str, os.PathLike)) else "<bytes>"
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            blob = f.read()
    elif isinstance(source, (bytes, bytearray, memoryview)):
        blob = bytes(source)
    else:
        blob = source.read()
    return parse_blocks(blob, name)


def read_dequantized(source: str | os.PathLike[str] | bytes | BinaryIO) -> np.ndarray:
    """The f32 values of a Q4_0 ``.dat`` file."""
    blocks, shape = read_blocks(source)
    return dequantize_blocks(blocks, shape)


__all__ = [
    "BLOCK", "BLOCK_BYTES", "ITEM_TYPE", "Q40Blocks", "Q40Data", "QuantizedOnRead", "as_float", "is_q4_0", "iter_payload", "codes_for", "quantize_blocks_", "scale_sources", "dequantize_blocks",
    "dequantize_codes", "header", "is_q4_0_header", "iter_blocks", "pack", "parse_blocks",
    "payload_size", "read_blocks", "read_dequantized", "shape_problem", "unpack",
]
