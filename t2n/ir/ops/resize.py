"""Upsampling as one op, for the engines that run it natively.

``nearest_upsample(x) {factors}``: every element of the trailing ``len(factors)`` axes
repeated ``factors[i]`` times along axis ``rank - len(factors) + i`` (nearest upsampling
by integer factors; axes before those are untouched). Made by
:mod:`t2n.passes.nearest_upsample` from the frontend's tile form, for a tract that runs
it as one kernel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from t2n.ir.infer_utils import InferError, tensor
from t2n.ir.schema import InferContext, OpTable
from t2n.ir.types import TensorType

TABLE = OpTable("resize")


def _nearest_eval(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> list[np.ndarray]:
    out = xs[0]
    first = out.ndim - len(attrs["factors"])
    for i, factor in enumerate(attrs["factors"]):
        out = np.repeat(out, int(factor), axis=first + i)
    return [out]


@TABLE.op("nearest_upsample", evaluate=_nearest_eval)
def _nearest_upsample(ctx: InferContext) -> list[TensorType]:
    """x's type with each of its trailing axes ``factors[i]`` times longer."""
    (x,) = ctx.types
    factors = [int(f) for f in ctx.attrs["factors"]]
    if not factors or len(factors) > x.rank or any(f < 1 for f in factors):
        raise InferError(f"nearest_upsample: factors {factors} for a rank-{x.rank} tensor")
    first = x.rank - len(factors)
    return [tensor(x.dtype, [d if i < first or factors[i - first] == 1 else d * factors[i - first]
                             for i, d in enumerate(x.shape)])]
