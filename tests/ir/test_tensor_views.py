"""Tensor data made from other tensor data (slices along an axis, concatenations and
stacks) gives numpy's result, read whole or in chunks of any size, and reads its
sources only through their chunks."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from t2n.ir import ArrayData, DType, LazyData
from t2n.ir.tensor_views import AxisSliceData, ComputedData, JoinedData, SwappedLastAxesData


def _streamed(arr: np.ndarray) -> LazyData:
    """Data that refuses to be read whole: only its (odd-sized) chunks."""
    def load() -> np.ndarray:
        raise AssertionError("read whole")

    def chunks(max_bytes: int) -> Iterator[np.ndarray]:
        flat = arr.reshape(-1)
        step = max(1, max_bytes // arr.itemsize // 3 or 1)
        for i in range(0, flat.size, step):
            yield flat[i:i + step]

    return LazyData(DType.from_numpy(arr.dtype), arr.shape, load, chunks)


def _chunked(data: object, max_bytes: int) -> np.ndarray:
    return np.concatenate([c.reshape(-1) for c in data.iter_chunks(max_bytes)])  # type: ignore[attr-defined]


shapes = st.lists(st.integers(1, 5), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(shape=shapes, data=st.data(), max_bytes=st.integers(1, 400))
def test_axis_slice(shape: list[int], data: st.DataObject, max_bytes: int) -> None:
    arr = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    axis = data.draw(st.integers(0, len(shape) - 1))
    start = data.draw(st.integers(0, shape[axis] - 1))
    stop = data.draw(st.integers(start, shape[axis]))
    step = data.draw(st.integers(1, 3))
    index = [slice(None)] * len(shape)
    index[axis] = slice(start, stop, step)
    expected = arr[tuple(index)]
    view = AxisSliceData(_streamed(arr), axis, start, stop, step)
    assert view.shape == expected.shape
    if expected.size:
        assert np.array_equal(_chunked(view, max_bytes), expected.reshape(-1))
    assert np.array_equal(AxisSliceData(ArrayData(arr), axis, start, stop, step).raw(), expected)


@settings(max_examples=60, deadline=None)
@given(shape=shapes, data=st.data(), count=st.integers(1, 3), stack=st.booleans(), max_bytes=st.integers(1, 400))
def test_joined(shape: list[int], data: st.DataObject, count: int, stack: bool, max_bytes: int) -> None:
    axis = data.draw(st.integers(0, len(shape) - (0 if stack else 1)))
    arrays = []
    for i in range(count):
        s = list(shape)
        if not stack:
            s[axis] = data.draw(st.integers(1, 4))
        arrays.append(np.arange(int(np.prod(s)), dtype=np.int32).reshape(s) + 1000 * i)
    expected = np.stack(arrays, axis) if stack else np.concatenate(arrays, axis)
    joined = JoinedData([_streamed(a) for a in arrays], axis, stack=stack)
    assert joined.shape == expected.shape
    assert np.array_equal(_chunked(joined, max_bytes), expected.reshape(-1))
    assert np.array_equal(JoinedData([ArrayData(a) for a in arrays], axis, stack=stack).raw(), expected)


def test_mismatched_joins_and_computed_shapes_are_refused() -> None:
    a, b = ArrayData(np.zeros((2, 3), np.float32)), ArrayData(np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match="cannot join"):
        JoinedData([a, b], 0)
    assert JoinedData([a, b], 1).shape == (2, 7)
    wrong = ComputedData([a], lambda x: x.T, (2, 3), DType.F32, "a transpose")
    with pytest.raises(ValueError, match="a transpose: made float32\\[3, 2\\]"):
        wrong.raw()


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=2, max_size=4), max_bytes=st.integers(1, 400))
def test_swapped_last_axes(shape: list[int], max_bytes: int) -> None:
    arr = np.arange(int(np.prod(shape)), dtype=np.float16).reshape(shape)
    expected = np.swapaxes(arr, -1, -2)
    view = SwappedLastAxesData(_streamed(arr))
    assert view.shape == expected.shape
    assert np.array_equal(_chunked(view, max_bytes), expected.reshape(-1))
