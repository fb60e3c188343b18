"""Values a rule needs as numbers, computed at lowering time from the constants they come
from.

The graph's inference keeps the value of small integer results (sizes, index lists), but
not of float ones: ``(length - self.kernel_size + self.padding_total) / self.stride``
with the sizes in int64 buffers (EnCodec's and Mimi's padded convolutions) goes through
a float division and a ``ceil`` before it is an integer padding again. When every leaf
of such a computation is a constant or a weight, its value is known now: this module
runs the ops' numpy evaluators over the few ops that lead to it. Anything read from a
graph input (its data, or a size that stays symbolic) is not folded.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from t2n.ir import DType, Trait, Value

MAX_OPS = 256
"""How many ops one fold may evaluate (the computation of a size is a handful)."""
MAX_ELEMENTS = 1 << 12
"""The largest value a fold computes or reads (sizes and paddings, not activations)."""


def fold(v: Value) -> np.ndarray | None:
    """``v``'s value if it can be computed now from constants and weights, else None."""
    memo: dict[int, np.ndarray | None] = {}
    budget = [MAX_OPS]
    return _fold(v, memo, budget)


def _fold(v: Value, memo: dict[int, np.ndarray | None], budget: list[int]) -> np.ndarray | None:
    if v.known is not None:
        k = np.asarray(v.known)
        return None if k.dtype == object else k
    key = id(v)
    if key in memo:
        return memo[key]
    memo[key] = None
    out = _evaluate(v, memo, budget)
    memo[key] = out
    return out


def _evaluate(v: Value, memo: dict[int, np.ndarray | None], budget: list[int]) -> np.ndarray | None:
    op = v.producer
    shape = v.type.shape
    if (op is None or not shape.is_static or shape.static_numel() > MAX_ELEMENTS
            or v.type.dtype is DType.BF16):
        return None
    budget[0] -= 1
    if budget[0] < 0:
        return None
    if op.has(Trait.CONSTANT_LIKE):
        data: Any = op.attrs.get("data")
        return np.asarray(data.values()) if data is not None and hasattr(data, "values") else None
    schema = op.schema
    if schema.evaluate is None or not op.has(Trait.PURE) or op.has(Trait.STATEFUL):
        return None
    inputs = []
    for i in op.inputs:
        k = _fold(i, memo, budget)
        if k is None:
            return None
        inputs.append(k)
    try:
        outs = schema.evaluate(inputs, op.attrs)
    except (TypeError, ValueError, ArithmeticError, IndexError):
        return None
    out = np.asarray(list(outs)[op.outputs.index(v)])
    if out.dtype == object or list(out.shape) != [int(d) for d in shape]:
        return None
    return out.astype(v.type.dtype.numpy, copy=False)


def folded_int(v: Any) -> Any:
    """A one-element integer value computed from constants only (``narrow(x, 0, 0, n)``
    with ``n`` from a mask the model builds) as a Python int; anything else as given."""
    if (isinstance(v, Value) and v.known is None and not v.type.dtype.is_float
            and (k := fold(v)) is not None and k.size == 1):
        return int(k.reshape(()))
    return v
