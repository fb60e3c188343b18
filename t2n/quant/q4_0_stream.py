"""Q4_0 payloads made while the weight streams: read a run of whole blocks, quantize it
on a worker thread (:mod:`t2n.quant.parallel`) while the next runs are read and the
previous blocks are written, in order, with a few runs in memory at a time.

Two sources: a weight whose values are already its Q4_0 values (``t2n.quantize``'s, in
memory), whose codes are derived at the scales it was given and proven to give back its
values; and :class:`QuantizedOnRead`, a checkpoint's weight quantized as it is read
(``t2n llm`` on a folder), whose scales and codes come out of one pass over the shard.
Both use :mod:`t2n.quant.q4_0_kernel`, so both give the bytes ``t2n.quantize`` gives.
Torch-free.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TypeAlias

import numpy as np

from t2n.errors import InvalidArgumentError, SerializationError
from t2n.ir import DType, TensorData
from t2n.ir.tensor_data import ConvertedData
from t2n.quant import q4_0_kernel as kernel
from t2n.quant.parallel import ordered_map

BLOCK = kernel.BLOCK
RUN_BYTES = 4 << 20
"""Source bytes read and handed to a worker at a time."""
FLOATS = (DType.F32, DType.F16, DType.BF16)

Run: TypeAlias = tuple[int, np.ndarray]
"""(index of its first block, raw elements of whole blocks)."""
SlabFn: TypeAlias = Callable[[np.ndarray, float, np.ndarray], np.ndarray]
"""(values ``[n, 32]``, percentile, output of the slab) → its f16 scales."""


def float_chain(data: TensorData) -> tuple[TensorData, tuple[DType, ...]]:
    """The data under :class:`ConvertedData` layers when it holds floats, and the float
    dtypes its values are rounded to on the way (so a run is read once and converted on
    a worker); ``data`` itself and ``()`` otherwise."""
    steps: list[DType] = []
    inner = data
    while isinstance(inner, ConvertedData):
        steps.append(inner.dtype)
        inner = inner.source
    if inner is data or inner.dtype not in FLOATS or any(s not in FLOATS for s in steps):
        return data, ()
    return inner, tuple(s for s in reversed(steps) if s is not DType.F32)


def runs(data: TensorData, run_bytes: int = RUN_BYTES) -> Iterator[Run]:
    """``data``'s raw elements, run by run, each a whole number of blocks (a chunk that
    ends inside a block is carried over to the next run)."""
    per = max(BLOCK * data.dtype.itemsize, run_bytes - run_bytes % (BLOCK * data.dtype.itemsize))
    carry: np.ndarray | None = None
    start = 0
    for chunk in data.iter_chunks(per):
        flat = chunk.reshape(-1)
        if carry is not None:
            flat, carry = np.concatenate([carry, flat]), None
        cut = flat.size - flat.size % BLOCK
        if cut < flat.size:
            carry = flat[cut:].copy()
        if cut:
            yield start, flat[:cut]
            start += cut // BLOCK
    if carry is not None:
        raise SerializationError(f"a Q4_0 source ended inside a block ({carry.size} values left)")


def _slabs(raw: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    step = kernel.SLAB_BLOCKS * BLOCK
    for at in range(0, raw.size, step):
        yield at // BLOCK, raw[at:at + step]


def checked_blocks(source: TensorData, scales: np.ndarray, name: str, *, run_bytes: int = RUN_BYTES,
                   workers: int | None = None) -> Iterator[memoryview]:
    """The Q4_0 payload of ``source`` (values that are already Q4_0 values) at ``scales``;
    a block whose values are not ``(q - 8) * d`` (the weight was changed after
    quantization) is refused with :class:`InvalidArgumentError` naming the tensor."""
    inner, rounding = float_chain(source)
    own = source.dtype

    def encode(run: Run) -> memoryview:
        first, raw = run
        out = np.empty(raw.size // BLOCK * kernel.BLOCK_BYTES, np.uint8)
        for at, slab in _slabs(raw):
            values = kernel.values_of(slab, inner.dtype, rounding).reshape(-1, BLOCK)
            index = first + at
            bad = kernel.encode_checked(values, scales[index:index + values.shape[0]], own,
                                        out[at * kernel.BLOCK_BYTES:(at + values.shape[0]) * kernel.BLOCK_BYTES])
            if bad >= 0:
                raise InvalidArgumentError(_bad_block(name, index + bad, values[bad]))
        return out.data.cast("B")

    yield from ordered_map(encode, runs(inner, run_bytes), workers)


def _bad_block(name: str, index: int, values: np.ndarray) -> str:
    """Why block ``index`` of a weight ``t2n.quantize`` quantized is no Q4_0 block now."""
    if not np.isfinite(values).all():
        what = (f"holds NaN or infinite values ({int(np.count_nonzero(~np.isfinite(values)))} of its "
                f"{values.size}), which Q4_0 cannot store")
    elif float(np.abs(values).max()) >= 8 * 65520.0:
        what = "holds values beyond Q4_0's range (a block's f16 scale reaches only 8 × 65504)"
    else:
        return (f"tensor {name!r}: block {index} holds values that are not Q4_0 codes of its scale: "
                "the weight was changed after t2n.quantize. Call t2n.quantize on the model again (or "
                "export it without Q4_0).")
    return (f"tensor {name!r}: block {index} {what}; they were written into the weight after "
            "t2n.quantize. Fix the weight and call t2n.quantize again (or export it without Q4_0).")


class QuantizedOnRead(TensorData):
    """A float weight quantized to Q4_0 as it is read (never whole in memory): its values
    are the dequantized ones (what ``t2n.quantize`` leaves in a model), its blocks
    (:meth:`iter_blocks`) the Q4_0 payload. The block scales are filled in
    :attr:`scales` by either, run by run and in order, before that run is handed on."""

    def __init__(self, source: TensorData, percentile: float = 1.0, name: str = "") -> None:
        if source.dtype not in (DType.F32, DType.F16):
            raise InvalidArgumentError(f"tensor {name!r}: Q4_0 on read takes f32 or f16 data, not {source.dtype}")
        self.source = source
        self.percentile = percentile
        self.name = name
        self.dtype = source.dtype
        self.shape = source.shape
        self.scales = np.zeros(math.prod(source.shape) // BLOCK, np.float16)

    def _per_run(self, fn: SlabFn, out_item: int, run_bytes: int = RUN_BYTES) -> Iterator[np.ndarray]:
        """``fn`` over every slab of every run on the workers; each run's scales are
        stored before its output (``out_item`` bytes per block) is yielded."""
        inner, rounding = float_chain(self.source)
        percentile = self.percentile

        def work(run: Run) -> tuple[int, np.ndarray, np.ndarray]:
            first, raw = run
            out = np.empty(raw.size // BLOCK * out_item, np.uint8)
            scales = np.empty(raw.size // BLOCK, np.float16)
            for at, slab in _slabs(raw):
                values = kernel.values_of(slab, inner.dtype, rounding).reshape(-1, BLOCK)
                n = values.shape[0]
                scales[at:at + n] = fn(values, percentile, out[at * out_item:(at + n) * out_item])
            return first, scales, out

        for first, scales, out in ordered_map(work, runs(inner, run_bytes)):
            if not np.isfinite(scales).all():
                bad = first + int(np.argwhere(~np.isfinite(scales))[0, 0])
                raise InvalidArgumentError(
                    f"tensor {self.name!r}: block {bad} holds NaN or infinite values (or values "
                    f"beyond f16's range), which Q4_0 cannot store: fix the checkpoint or export "
                    f"without Q4_0")
            self.scales[first:first + scales.size] = scales
            yield out

    def iter_blocks(self) -> Iterator[memoryview]:
        """The Q4_0 payload, run by run."""
        for out in self._per_run(kernel.encode_fresh, kernel.BLOCK_BYTES):
            yield out.data.cast("B")

    def iter_chunks(self, max_bytes: int = RUN_BYTES) -> Iterator[np.ndarray]:
        """The dequantized values in this data's dtype, at most ``max_bytes`` a chunk."""
        dtype = self.dtype
        inner, _ = float_chain(self.source)
        run_bytes = min(RUN_BYTES, max(1, max_bytes) * inner.dtype.itemsize // dtype.itemsize)

        def values(values: np.ndarray, percentile: float, out: np.ndarray) -> np.ndarray:
            return kernel.dequantize_fresh(values, percentile, dtype, out.view(dtype.numpy))

        for out in self._per_run(values, BLOCK * dtype.itemsize, run_bytes):
            yield out.view(dtype.numpy)

    def raw(self) -> np.ndarray:
        return np.concatenate(list(self.iter_chunks())).reshape(self.shape)

    def __repr__(self) -> str:
        return f"QuantizedOnRead({self.dtype}{list(self.shape)} {self.name})"


__all__ = ["QuantizedOnRead", "checked_blocks", "float_chain", "runs"]
