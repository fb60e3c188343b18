"""The Q4_0 kernel gives the bytes of the straightforward algorithm it replaced (kept
here as the reference: one numpy step per formula), on awkward inputs: shapes whose
blocks cross slabs and chunks, f32/f16/bf16 weights, zero / constant / tied / subnormal
/ huge blocks, streamed checkpoints quantized on read; and bad values are refused."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from t2n.errors import InvalidArgumentError, SerializationError
from t2n.ir import ArrayData, DType, LazyData, TensorData
from t2n.ir.tensor_data import ConvertedData, convert_raw
from t2n.quant import q4_0, q4_0_kernel
from t2n.quant.model import quantize_weight_
from t2n.quant.parallel import ConvertedOnWorkers, ordered_map
from t2n.serialize.dat import dat_bytes
from t2n.serialize.torch_io import convert_raw_fast
from t2n.torch_data import tensor_data

# -- the reference: the algorithm before the kernel, one numpy step per formula --------


def ref_quantize(values: np.ndarray, percentile: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes [n, 32], f16 scales, dequantized f32 values) of f32 ``values`` [n, 32]."""
    high, low = values.max(axis=1), values.min(axis=1)
    top = np.where(high >= -low, high, low)
    if percentile < 1.0:
        mags = np.quantile(np.abs(values), percentile, axis=1).astype(np.float32)
        top = mags * np.where(top < 0, np.float32(-1), np.float32(1))
    scales = (top / np.float32(-8)).astype(np.float16)
    codes = ref_codes(values, scales)
    return codes, scales, (codes.astype(np.float32) - np.float32(8)) * scales.astype(np.float32)[:, None]


def ref_codes(values: np.ndarray, scales: np.ndarray) -> np.ndarray:
    d = scales.astype(np.float32)[:, None]
    with np.errstate(divide="ignore"):
        inverse = np.where(d == 0, np.float32(0), np.float32(1) / d)
    q = values * inverse
    q += np.float32(8.5)
    np.floor(q, out=q)
    np.clip(q, 0, 15, out=q)
    return q.astype(np.uint8)


def ref_pack(codes: np.ndarray, scales: np.ndarray) -> bytes:
    out = np.empty((codes.shape[0], 18), dtype=np.uint8)
    out[:, :2] = scales.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = codes[:, :16] | (codes[:, 16:] << np.uint8(4))
    return out.tobytes()


def ref_round(values: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """f32 values rounded to ``dtype`` (nearest even), widened back."""
    return torch.from_numpy(values).to(dtype).float().numpy()


# -- awkward weights ---------------------------------------------------------------------


def awkward(shape: tuple[int, ...], seed: int, scale: float = 0.02) -> np.ndarray:
    """Random f32 values of ``shape`` whose first blocks are the hard cases."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal(math.prod(shape)) * scale).astype(np.float32).reshape(-1, 32)
    cases = [
        np.zeros(32),                                   # scale 0: codes 8
        np.full(32, 0.25),                              # constant block
        np.linspace(-1, 1, 32),                         # largest == -smallest: the largest wins
        np.linspace(-2, 1, 32),                         # negative top
        np.arange(32) - 8.5,                            # scale 1: values on .5 (x + 8.5 exact integers)
        rng.standard_normal(32) * 1e-7,                 # subnormal f16 scales
        np.r_[65280.0, -60000.0, rng.standard_normal(30) * 100],  # the f16 range's edge (bf16 too)
        np.r_[np.full(31, 1e-3), 7.0],                  # one outlier: most codes 8
    ]
    for i, case in enumerate(cases[:w.shape[0]]):
        w[i] = case
    return w.reshape(shape)


SHAPES = [(1, 32), (3, 96), (5, 3, 64), (300, 1024)]  # the last crosses a slab (8192 blocks)
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_quantize_and_write_in_memory_give_the_reference_bytes(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    w = torch.from_numpy(awkward(shape, 1)).to(dtype)
    values = w.float().numpy().reshape(-1, 32)
    codes, scales, dequantized = ref_quantize(values)
    stored = ref_round(dequantized, dtype)
    got_scales = quantize_weight_(w)  # in place, as t2n.quantize
    assert got_scales.tobytes() == scales.tobytes()
    assert np.array_equal(w.float().numpy().reshape(-1, 32), stored, equal_nan=True)
    payload = b"".join(bytes(c) for c in q4_0.iter_blocks(q4_0.Q40Data(tensor_data(w), got_scales, "w")))
    assert payload == ref_pack(ref_codes(stored, scales), scales)


def test_percentile_recipe_gives_the_reference_bytes() -> None:
    w = torch.from_numpy(awkward((40, 64), 2))
    codes, scales, dequantized = ref_quantize(w.numpy().reshape(-1, 32).copy(), 0.99)
    assert quantize_weight_(w, 0.99).tobytes() == scales.tobytes()
    assert np.array_equal(w.numpy().reshape(-1, 32), dequantized)


def _odd_chunks(data: np.ndarray, size: int) -> LazyData:
    """``data`` read in chunks of ``size`` elements whatever is asked: chunks end inside blocks."""
    flat = data.reshape(-1)

    def chunks(max_bytes: int) -> Iterator[np.ndarray]:
        for at in range(0, flat.size, size):
            yield flat[at:at + size].copy()

    return LazyData(DType.from_numpy(data.dtype), data.shape, lambda: data, chunks, "odd chunks")


def _streamed_reference(raw: np.ndarray, model: torch.dtype) -> tuple[bytes, np.ndarray, np.ndarray]:
    """The previous streamed path: the shard converted to the model's dtype, quantized,
    rounded back, and the writer's codes derived from those values."""
    values = torch.from_numpy(raw).to(model).float().numpy().reshape(-1, 32)
    _, scales, dequantized = ref_quantize(values)
    stored = ref_round(dequantized, model)
    return ref_pack(ref_codes(stored, scales), scales), scales, stored


@pytest.mark.parametrize(("shard", "model"), [
    (torch.float32, torch.float16), (torch.float32, torch.float32),
    (torch.float16, torch.float16), (torch.bfloat16, torch.float16),
])
@pytest.mark.parametrize("chunk", [None, 1000])
def test_streamed_checkpoint_weights_give_the_reference_bytes(shard: torch.dtype, model: torch.dtype,
                                                              chunk: int | None) -> None:
    w = torch.from_numpy(awkward((300, 1024), 3)).to(shard)
    raw = w.view(torch.int16).numpy().view(np.uint16) if shard == torch.bfloat16 else w.numpy()
    source: TensorData = ArrayData(raw, DType.BF16 if shard == torch.bfloat16 else None)
    if chunk is not None:
        source = _odd_chunks(raw, chunk) if shard != torch.bfloat16 else source
    want = DType.F16 if model == torch.float16 else DType.F32
    if source.dtype is not want:
        source = ConvertedData(source, want)
    expected, scales, stored = _streamed_reference(w.float().numpy(), model)
    blocks = q4_0.QuantizedOnRead(source, 1.0, "w")
    data = q4_0.Q40Data(blocks, blocks.scales, "w")
    assert b"".join(bytes(c) for c in q4_0.iter_payload(data)) == expected
    assert blocks.scales.tobytes() == scales.tobytes()
    values = np.concatenate(list(blocks.iter_chunks(1 << 16)))  # the values a float reader gets
    assert values.dtype == want.numpy and np.array_equal(values.astype(np.float32), stored.reshape(-1))


def test_a_tied_streamed_weight_is_quantized_once_with_the_same_bytes(tmp_path: Path) -> None:
    from t2n.llm.common.streaming import StreamedCheckpoint

    emb = torch.nn.Embedding(64, 64)
    head = torch.nn.Linear(64, 64, bias=False)
    head.weight = emb.weight
    model = torch.nn.Sequential(emb, head)
    shard = ArrayData(emb.weight.detach().numpy())
    checkpoint = StreamedCheckpoint(tmp_path, {"0.weight": shard}, 0)
    checkpoint.replaced["0.weight"] = q4_0.QuantizedOnRead(shard, 1.0, "0.weight")
    weights = checkpoint.weights_for(model, "")
    assert weights["0.weight"] is weights["1.weight"]  # one tensor under both names
    expected, _, _ = _streamed_reference(emb.weight.detach().numpy(), torch.float32)
    data = weights["0.weight"]
    assert isinstance(data, q4_0.QuantizedOnRead)
    assert b"".join(bytes(c) for c in data.iter_blocks()) == expected


# -- bad values --------------------------------------------------------------------------


@pytest.mark.parametrize(("bad", "where"), [(np.nan, 1), (np.inf, 1), (-1e6, 2)])
def test_streamed_weights_q4_0_cannot_hold_are_refused_by_name(bad: float, where: int) -> None:
    w = np.random.default_rng(4).standard_normal((4, 64)).astype(np.float32)
    w.reshape(-1, 32)[where, 5] = bad  # -1e6 / 8 is beyond f16: an infinite scale
    blocks = q4_0.QuantizedOnRead(ArrayData(w), 1.0, "model.layers.0.mlp.up_proj.weight")
    with pytest.raises(InvalidArgumentError,
                       match=rf"'model\.layers\.0\.mlp\.up_proj\.weight': block {where} holds NaN or infinite"
                             r".*export without Q4_0"):
        dat_bytes(q4_0.Q40Data(blocks, blocks.scales, blocks.name))


def test_a_nan_written_into_a_quantized_weight_is_refused_by_name() -> None:
    w = torch.from_numpy(awkward((4, 64), 5)).to(torch.float16)
    scales = quantize_weight_(w)
    w[3, 40] = float("nan")
    with pytest.raises(InvalidArgumentError, match=r"'lm_head\.weight'.*block 7.*t2n\.quantize"):
        dat_bytes(q4_0.Q40Data(tensor_data(w), scales, "lm_head.weight"))


def test_a_source_ending_inside_a_block_is_refused() -> None:
    short = LazyData(DType.F32, (2, 32), lambda: np.zeros(64, np.float32),
                     lambda n: iter([np.zeros(48, np.float32)]), "short")
    with pytest.raises(SerializationError, match="ended inside a block.*16 values"):
        b"".join(bytes(c) for c in q4_0.iter_blocks(q4_0.Q40Data(short, np.zeros(2, np.float16), "w")))


def test_quantize_on_read_takes_f32_or_f16_only() -> None:
    with pytest.raises(InvalidArgumentError, match="'ids'.*f32 or f16.*i64"):
        q4_0.QuantizedOnRead(ArrayData(np.zeros((2, 32), np.int64)), 1.0, "ids")


# -- the workers ---------------------------------------------------------------------------


def test_ordered_map_keeps_order_raises_at_the_item_and_restores_torch_threads() -> None:
    threads = torch.get_num_threads()

    def work(i: int) -> int:
        if i == 7:
            raise ValueError("item 7")
        return i * i

    assert list(ordered_map(work, range(7), workers=2)) == [i * i for i in range(7)]
    got = []
    with pytest.raises(ValueError, match="item 7"):
        for value in ordered_map(work, range(100), workers=2):
            got.append(value)
    assert got == [i * i for i in range(7)]
    assert torch.get_num_threads() == threads


@pytest.mark.parametrize(("src", "dst"), [(DType.F32, DType.F16), (DType.BF16, DType.F16),
                                          (DType.BF16, DType.F32), (DType.F16, DType.F32)])
def test_conversion_on_workers_gives_the_bytes_of_convert_raw(src: DType, dst: DType) -> None:
    rng = np.random.default_rng(6)
    values = np.r_[rng.standard_normal(100_000) * 1e3, [np.nan, np.inf, -np.inf, 1e-8, -0.0, 7e4, 65520]]
    raw = torch.from_numpy(values.astype(np.float32)).to(
        {DType.F32: torch.float32, DType.F16: torch.float16, DType.BF16: torch.bfloat16}[src])
    raw_np = raw.view(torch.int16).numpy().view(np.uint16) if src is DType.BF16 else raw.numpy()
    data = ConvertedOnWorkers(_odd_chunks(raw_np, 4099) if src is not DType.BF16 else ArrayData(raw_np, src), dst)
    got = np.concatenate(list(data.iter_chunks(1 << 14)))
    # what the .dat writer converted with before (PyTorch's kernel: NaN payloads differ from numpy's)
    assert got.tobytes() == convert_raw_fast(raw_np.copy(), src, dst).tobytes() == data.raw().tobytes()
    assert np.array_equal(got, convert_raw(raw_np, src, dst), equal_nan=True)


def test_kernel_slabs_are_smaller_than_a_run() -> None:
    from t2n.quant.q4_0_stream import RUN_BYTES

    assert q4_0_kernel.SLAB_BLOCKS * 32 * 4 <= RUN_BYTES
