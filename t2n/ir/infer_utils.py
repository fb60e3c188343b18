"""Helpers shared by op inference functions: broadcasting, axes, slicing with symbols."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from t2n.errors import IRError
from t2n.ir.dims import Dim, Sym, SymbolicComparisonError, as_dim, decide, sym_max, sym_min
from t2n.ir.dtypes import DType
from t2n.ir.schema import InferContext
from t2n.ir.types import Shape, TensorType

INT64_MAX = 2**63 - 1


class InferError(IRError, ValueError):
    """An op's inputs or attributes do not fit together."""


def broadcast_dims(a: Dim, b: Dim) -> Dim:
    if a == b:
        return a
    if a == 1:
        return b
    if b == 1:
        return a
    if isinstance(a, Sym) and not isinstance(b, Sym):
        return b
    if isinstance(b, Sym) and not isinstance(a, Sym):
        return a
    if isinstance(a, Sym) and isinstance(b, Sym):
        return a
    raise InferError(f"cannot broadcast dimensions {a} and {b}")


def broadcast_shapes(*shapes: Sequence[Dim]) -> Shape:
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = [1] * rank
    for s in shapes:
        padded = [1] * (rank - len(s)) + list(s)
        out = [broadcast_dims(x, y) for x, y in zip(out, padded)]
    return Shape(out)


def norm_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise InferError(f"axis {axis} out of range for rank {rank}")
    return axis % rank if rank else 0


def same_dtype(ctx: InferContext, op: str) -> DType:
    dtypes = {t.dtype for t in ctx.types}
    if len(dtypes) != 1:
        raise InferError(f"{op}: operands must share a dtype, got {sorted(str(d) for d in dtypes)}")
    return next(iter(dtypes))


def known_dims(ctx: InferContext, i: int, what: str) -> list[Dim]:
    """A 1-D integer operand whose value is known (possibly symbolic), as dims."""
    k = ctx.known_or_none(i)
    if k is None:
        raise InferError(f"{what} must be known when the graph is built (got a computed tensor)")
    return [as_dim(x) for x in np.asarray(k).reshape(-1).tolist()]


def slice_dim(dim: Dim, begin: Dim, end: Dim, step: int) -> tuple[Dim, Dim, Dim]:
    """Normalize python-style ``begin:end:step`` against ``dim``; returns (begin, end, length)."""
    if step <= 0:
        raise InferError(f"slice step must be positive, got {step}")

    def norm(i: Dim) -> Dim:
        if isinstance(i, int):
            if i >= INT64_MAX // 2:
                return dim
            # an axis being sliced has at least one element (t2n cannot express empty
            # tensors): x[:, 1:] and x[:, :-1] need no clamp
            if i < 0:
                return dim + i if i == -1 else sym_max(i + dim, 0)
            return i if i <= 1 else sym_min(i, dim)
        # a bound computed from sizes: clamped as PyTorch does where its sign is known
        # (``n // 2``); otherwise, and on a static axis, taken as in range, as traced
        # (tract refuses to run a slice out of range: never a silent wrong result)
        if isinstance(dim, int):
            return i
        try:
            if decide("ge", i, 0):
                return sym_min(i, dim)
            return sym_max(i + dim, 0)
        except SymbolicComparisonError:
            return i

    b = norm(begin)
    e = norm(end)
    # dim - 1 and dim are >= 0 by the same fact, so they need no clamp against a 0 begin
    e = e if isinstance(b, int) and b == 0 and e in (dim, dim - 1) else sym_max(e, b)
    length = (e - b + (step - 1)) // step
    if isinstance(length, int) and length < 0:
        length = 0
    return b, e, length


def tensor(dtype: DType, shape: Sequence[object]) -> TensorType:
    return TensorType(dtype, Shape(shape))
