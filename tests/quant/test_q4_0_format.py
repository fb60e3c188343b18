"""Q4_0 blocks: the bit layout against a block computed by hand, pack/unpack round
trips, chunked packing from a weight's memory, and corrupt files refused."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from t2n.errors import CorruptTensorFileError, InvalidArgumentError
from t2n.ir import ArrayData
from t2n.quant import q4_0
from t2n.serialize.dat import dat_bytes, dat_size, read_dat


def test_one_block_by_hand() -> None:
    # scale 0.5 (f16 0x3800); codes 0..15 then 15..0: value (q - 8) * 0.5
    codes = np.array([list(range(16)) + list(range(15, -1, -1))], dtype=np.uint8)
    block = q4_0.pack(codes, np.array([0.5], dtype=np.float16))
    expected = bytes([0x00, 0x38]) + bytes((j | ((15 - j) << 4)) for j in range(16))
    assert block.tobytes() == expected
    back_codes, back_scales = q4_0.unpack(block)
    assert np.array_equal(back_codes, codes) and back_scales[0] == np.float16(0.5)
    values = q4_0.dequantize_blocks(block, (1, 32))
    assert values[0, 0] == -4.0 and values[0, 15] == 3.5 and values[0, 16] == 3.5 and values[0, 31] == -4.0


def _weights(seed: int, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Dequantized weights (what t2n.quantize leaves in a model) and their scales."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape)) // 32
    scales = (rng.random(n) * 0.1).astype(np.float16)
    scales[0] = 0  # an all-zero block
    codes = rng.integers(0, 16, (n, 32)).astype(np.uint8)
    codes[0] = 8
    return q4_0.dequantize_codes(codes, scales).reshape(shape), scales


@pytest.mark.parametrize("shape", [(4, 64), (3, 2, 32), (1, 32)])
def test_dat_round_trip(shape: tuple[int, ...]) -> None:
    w, scales = _weights(1, shape)
    data = q4_0.Q40Data(ArrayData(w), scales, "w")
    blob = dat_bytes(data)
    assert len(blob) == dat_size(data) == 128 + q4_0.payload_size(shape)
    assert struct.unpack_from("<II", blob, 44) == (0xFFFFFFFF, 0x54523040)
    assert np.array_equal(read_dat(blob), w)
    blocks, back_shape = q4_0.read_blocks(blob)
    assert back_shape == shape and np.array_equal(q4_0.unpack(blocks)[1], scales)


def test_chunks_that_end_inside_blocks_give_the_same_bytes() -> None:
    w, scales = _weights(2, (8, 96))
    whole = b"".join(bytes(c) for c in q4_0.iter_blocks(q4_0.Q40Data(ArrayData(w), scales, "w")))
    # a strided (transposed-back) source is copied in small odd-sized chunks
    strided = ArrayData(np.asfortranarray(w))
    pieces = b"".join(bytes(c) for c in q4_0.iter_blocks(q4_0.Q40Data(strided, scales, "w"), chunk_bytes=200))
    assert whole == pieces


def test_f16_weights_pack_to_the_same_codes() -> None:
    w, scales = _weights(3, (2, 64))
    f32 = dat_bytes(q4_0.Q40Data(ArrayData(w), scales, "w"))
    f16 = dat_bytes(q4_0.Q40Data(ArrayData(w.astype(np.float16)), scales, "w"))
    assert f32 == f16


def test_a_weight_changed_after_quantization_is_refused() -> None:
    w, scales = _weights(4, (2, 64))
    w[1, 40] += 0.001
    with pytest.raises(InvalidArgumentError, match=r"'layer\.weight'.*block 3.*t2n\.quantize"):
        dat_bytes(q4_0.Q40Data(ArrayData(w), scales, "layer.weight"))


@pytest.mark.parametrize(("shape", "why"), [((64,), "rank 1"), ((2, 48), "blocks of 32"), ((0, 32), "empty")])
def test_shapes_without_blocks_are_refused_naming_the_tensor(shape: tuple[int, ...], why: str) -> None:
    with pytest.raises(InvalidArgumentError, match=rf"'bias'.*{why}"):
        q4_0.Q40Data(ArrayData(np.zeros(shape, np.float32)), np.zeros(1, np.float16), "bias")


def test_integer_data_and_wrong_scale_counts_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="'ids'.*i64"):
        q4_0.Q40Data(ArrayData(np.zeros((2, 32), np.int64)), np.zeros(2, np.float16), "ids")
    with pytest.raises(InvalidArgumentError, match="'w'.*needs 2 f16 scales, got 3"):
        q4_0.Q40Data(ArrayData(np.zeros((2, 32), np.float32)), np.zeros(3, np.float16), "w")


def _good_file() -> bytes:
    w, scales = _weights(5, (2, 64))
    return dat_bytes(q4_0.Q40Data(ArrayData(w), scales, "w"))


@pytest.mark.parametrize(("corrupt", "message"), [
    (lambda b: b[:-1], "truncated: 71 of 72"),
    (lambda b: b[:100], "not a .dat file"),
    (lambda b: b + b"\0", "longer than declared"),
    (lambda b: b[:4] + struct.pack("<I", 70) + b[8:], "says 70 payload bytes"),
    (lambda b: b[:16] + struct.pack("<I", 48) + b[20:], "do not split into blocks"),
    (lambda b: b[:8] + struct.pack("<I", 1) + b[12:], "nonzero|bad rank|rank 1"),
    (lambda b: b[:128] + bytes([0x00, 0x7C]) + b[130:], "NaN or infinite scale"),
])
def test_corrupt_q4_0_files_are_refused(corrupt, message: str) -> None:  # type: ignore[no-untyped-def]
    bad = corrupt(_good_file())
    with pytest.raises(CorruptTensorFileError, match=message):
        read_dat(bad)
    with pytest.raises(CorruptTensorFileError):
        q4_0.read_blocks(bad)
