import io
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from t2n.errors import CorruptTensorFileError, SerializationError, TensorTooLargeError
from t2n.ir import ArrayData, DType
from t2n.serialize.dat import HEADER_SIZE, dat_bytes, make_header, read_dat, write_dat

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
