"""Small building blocks lowering rules share (IR idioms, not torch logic)."""

from __future__ import annotations

from collections.abc import Sequence

from t2n.ir import Builder, Dim, DType, Value


def unsqueeze(b: Builder, x: Value, axes: Sequence[int]) -> Value:
    return x if not axes else b.op("unsqueeze", x, axes=tuple(sorted(axes)))


def squeeze(b: Builder, x: Value, axes: Sequence[int]) -> Value:
    return x if not axes else b.op("squeeze", x, axes=tuple(sorted(axes)))


def reshape(b: Builder, x: Value, dims: Sequence[Dim]) -> Value:
    if list(x.type.shape) == list(dims):
        return x
    return b.op("reshape", x, b.ints(list(dims)))


def transpose(b: Builder, x: Value, perm: Sequence[int]) -> Value:
    if list(perm) == list(range(x.rank)):
        return x
    return b.op("transpose", x, perm=tuple(perm))


def swap_last(b: Builder, x: Value, a: int = -2, c: int = -1) -> Value:
    perm = list(range(x.rank))
    perm[a], perm[c] = perm[c], perm[a]
    return transpose(b, x, perm)


def scalar(b: Builder, value: float | int | bool, dtype: DType) -> Value:
    import numpy as np

    return b.const(np.asarray(value, dtype=dtype.numpy), dtype)


def i64(b: Builder, value: int) -> Value:
    """A 0-d i64 constant."""
    import numpy as np

    return b.const(np.asarray(value, dtype=np.int64), DType.I64)


def dims_product(dims: Sequence[Dim]) -> Dim:
    """The product of sizes (symbolic when any is)."""
    n: Dim = 1
    for d in dims:
        n = n * d
    return n


def dim_value(b: Builder, x: Value, axis: int) -> Value:
    """``x.shape[axis]`` as a 0-d i64 value that stays symbolic under dynamic axes."""
    shape = b.op("shape_of", x)
    return b.op("gather", shape, b.const(axis, DType.I64), axis=0)


def from_tensor_data(v: Value) -> bool:
    """Whether ``v`` is computed from the values of a graph input (not only from sizes,
    which ``shape_of`` reads, nor from constants)."""
    stack, seen = [v], set()
    while stack:
        cur = stack.pop()
        if id(cur) in seen:
            continue
        seen.add(id(cur))
        op = cur.producer
        if op is None:
            return True  # a graph input
        if op.kind != "shape_of":
            stack.extend(op.inputs)
    return False
