import io
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from t2n.errors import CorruptTensorFileError, SerializationError, TensorTooLargeError
from t2n.ir import ArrayData, DType, LazyData
from t2n.ir.tensor_data import ConvertedData, convert_raw
from t2n.serialize.dat import (
    HEADER_SIZE,
    dat_bytes,
    iter_dat,
    iter_payload,
    make_header,
    read_dat,
    read_dat_header,
    write_dat,
)
from t2n.serialize.torch_io import convert_raw_fast

DTYPES = [np.float32, np.float16, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(DTYPES).flatmap(
    lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=0, max_dims=5, max_side=7))))
def test_round_trip(arr):
    blob = dat_bytes(arr)
    assert len(blob) == HEADER_SIZE + (arr.size + 7) // 8 if arr.dtype == bool else True
    back = read_dat(blob)
    assert back.dtype == arr.dtype and back.shape == arr.shape
    np.testing.assert_array_equal(back, arr)


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=2, max_dims=4, max_side=9)), st.integers(1, 64))
def test_strided_sources_stream_in_small_chunks(arr, chunk):
    view = np.swapaxes(arr, 0, -1)
    buf = io.BytesIO()
    write_dat(buf, ArrayData(view), chunk_bytes=chunk)
    np.testing.assert_array_equal(read_dat(buf.getvalue()), view)


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.bool_, st.integers(0, 100)), st.integers(1, 20))
def test_bool_packing_across_chunks(arr, chunk):
    buf = io.BytesIO()
    write_dat(buf, ArrayData(arr), chunk_bytes=chunk)
    np.testing.assert_array_equal(read_dat(buf.getvalue()), arr)


def test_header_layout_matches_the_spec():
    h = make_header(DType.F32, (2, 3))
    assert len(h) == 128 and h[:4] == b"\x4e\xef\x01\x00"
    assert struct.unpack_from("<II", h, 4) == (24, 2)
    assert struct.unpack_from("<II", h, 44) == (32, 0)
    assert make_header(DType.I64, (1,))[44:52] == struct.pack("<II", 64, 4)
    assert make_header(DType.U8, (1,))[44:52] == struct.pack("<II", 8, 1)
    assert make_header(DType.BOOL, (9,))[4:8] == struct.pack("<I", 2)


def test_bf16_has_no_item_type():
    with pytest.raises(SerializationError, match="bf16"):
        make_header(DType.BF16, (2,))


def test_bf16_written_as_f16_and_f32():
    vals = np.array([1.0, -2.5, 3.140625], np.float32)
    bits = (vals.view(np.uint32) >> 16).astype(np.uint16)
    data = ArrayData(bits, DType.BF16)
    np.testing.assert_array_equal(read_dat(dat_bytes(data, DType.F32)), vals)
    np.testing.assert_array_equal(read_dat(dat_bytes(data, DType.F16)), vals.astype(np.float16))


def test_payload_limit_is_refused():
    with pytest.raises(TensorTooLargeError, match="4 GiB"):
        make_header(DType.F32, (2**30 + 1,))


GOOD = dat_bytes(np.arange(6, dtype=np.float32).reshape(2, 3))


@pytest.mark.parametrize("mutate, message", [
    (lambda b: b[:100], "shorter than the 128-byte header"),
    (lambda b: b"XX" + b[2:], "wrong magic"),
    (lambda b: b[:-1], "truncated"),
    (lambda b: b + b"\0", "past the declared payload"),
    (lambda b: b[:2] + b"\x02" + b[3:], "unsupported .dat version"),
    (lambda b: b[:4] + struct.pack("<I", 20) + b[8:], "needs 24"),
    (lambda b: b[:8] + struct.pack("<I", 9) + b[12:], "rank 9"),
    (lambda b: b[:48] + struct.pack("<I", 7) + b[52:], "unknown item type"),
    (lambda b: b[:48] + struct.pack("<I", 0x54523040) + b[52:], "vendor item type"),
    (lambda b: b[:44] + struct.pack("<I", 12) + b[48:], "unknown item type"),
    (lambda b: b[:20] + struct.pack("<I", 5) + b[24:], "nonzero extents"),
])
def test_corrupt_files_are_rejected(mutate, message):
    with pytest.raises(CorruptTensorFileError, match=message):
        read_dat(mutate(GOOD))


# -- streaming, conversion and zero-copy ---------------------------------------------

SPECIALS = [0.0, -0.0, 1.0, -1.5, 65504.0, 65520.0, 1e5, -1e5, 6.1e-5, 6e-8, 1e-9, 3.0e38,
            float("inf"), -float("inf")]


def _bf16_bits(values):
    return (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([(DType.F32, DType.F16), (DType.F64, DType.F16), (DType.F64, DType.F32),
                        (DType.BF16, DType.F16), (DType.BF16, DType.F32), (DType.F16, DType.F32)]),
       st.lists(st.one_of(st.floats(width=32, allow_nan=False), st.sampled_from(SPECIALS)), max_size=64))
def test_fast_conversion_gives_numpys_bytes(pair, values):
    """torch's kernels (used when torch is loaded) and numpy's round the same way."""
    src, dst = pair
    with np.errstate(over="ignore"):
        raw = _bf16_bits(values) if src is DType.BF16 else np.asarray(values, np.float32).astype(src.numpy)
        raw = np.array(raw)  # writable, contiguous: the fast path applies
        slow = convert_raw(raw, src, dst)
    fast = convert_raw_fast(raw, src, dst)
    assert fast.dtype == slow.dtype == dst.numpy
    np.testing.assert_array_equal(fast.view(np.uint8), slow.view(np.uint8))


def test_bf16_to_f16_edges():
    """Exact in f16's normal range, inf beyond it: the documented behaviour."""
    vals = np.array([1.0, -2.5, 0.0078125, 60000.0, 1e5, -1e5], np.float32)
    bits = _bf16_bits(vals)
    exact = bits.astype(np.uint32) << 16
    as_f32 = exact.view(np.float32)
    got = read_dat(dat_bytes(ArrayData(bits, DType.BF16), DType.F16))
    np.testing.assert_array_equal(got[:4], as_f32[:4].astype(np.float16))
    assert np.isposinf(got[4]) and np.isneginf(got[5])
    np.testing.assert_array_equal(read_dat(dat_bytes(ArrayData(bits, DType.BF16), DType.F32)), as_f32)


def test_contiguous_payload_is_a_view_of_the_tensor():
    arr = np.arange(1000, dtype=np.float32)
    chunks = list(iter_payload(ArrayData(arr), chunk_bytes=1024))
    assert len(chunks) == 4
    for i, c in enumerate(chunks):
        view = np.frombuffer(c, dtype=np.float32)
        assert np.shares_memory(view, arr)
        assert view.ctypes.data == arr.ctypes.data + i * 1024


@settings(max_examples=25, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=4, max_side=12)), st.integers(4, 200))
def test_copies_and_conversions_stay_in_bounded_chunks(arr, chunk):
    """Strided data is copied, and converted data produced, one bounded chunk at a time."""
    view = arr.T
    for data, out in ((ArrayData(view), None), (ArrayData(view), DType.F16),
                      (ConvertedData(ArrayData(view), DType.F16), None)):
        pieces = list(iter_payload(data, out, chunk_bytes=chunk))
        # a chunk holds at most max(chunk, one element) bytes of the source
        assert all(p.nbytes <= max(chunk, 4) for p in pieces)
        with np.errstate(over="ignore"):
            expected = view.astype(np.float16) if (out or data.dtype) is DType.F16 else view
        got = np.frombuffer(b"".join(bytes(p) for p in pieces), dtype=expected.dtype)
        np.testing.assert_array_equal(got, expected.reshape(-1))


def test_converted_data_converts_lazily_chunk_by_chunk():
    calls = []
    bits = _bf16_bits(np.linspace(-4, 4, 1000))

    def chunks(max_bytes):
        calls.append(max_bytes)
        step = max_bytes // 2
        for i in range(0, bits.size, step):
            yield bits[i : i + step]

    lazy = LazyData(DType.BF16, (1000,), load=lambda: bits, chunks=chunks)
    conv = ConvertedData(lazy, DType.F16)
    assert calls == []  # nothing read until written
    got = read_dat(dat_bytes(conv))
    np.testing.assert_array_equal(got, (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float16))
    assert calls and max(calls) <= 8 << 20


def test_header_is_checked_before_anything_is_read():
    def never():
        raise AssertionError("data read for a tensor that cannot be written")

    huge = LazyData(DType.F32, (1 << 30, 2), load=never, chunks=lambda n: never())
    with pytest.raises(TensorTooLargeError, match="4 GiB"):
        iter_dat(huge)
    big_bf16 = LazyData(DType.BF16, (3 << 29,), load=never, chunks=lambda n: never())
    iter_dat(big_bf16, DType.F16)  # 3 GiB as f16: fits, and nothing is read yet
    with pytest.raises(TensorTooLargeError):
        iter_dat(big_bf16, DType.F32)  # 6 GiB as f32


def test_read_header_checks_the_file_size(tmp_path):
    p = tmp_path / "t.dat"
    write_dat(p, np.ones((3, 5), np.int32), sync=True)
    assert read_dat_header(p) == (DType.I32, (3, 5))
    p.write_bytes(p.read_bytes()[:-2])
    with pytest.raises(CorruptTensorFileError, match="truncated"):
        read_dat_header(p)
