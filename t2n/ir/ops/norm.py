"""Normalization ops that a target may run as one fused op (tract's ``rms_norm``).

Mean/variance normalizations (layer, group, instance, batch statistics) are lowered
to reductions and element-wise ops; only what some engine fuses gets an op here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from t2n.ir.attributes import FLOAT, INTS, required
from t2n.ir.infer_utils import InferError
from t2n.ir.schema import InferContext, OpTable
from t2n.ir.types import TensorType

TABLE = OpTable("norm")


def _eval_rms_norm(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
    x = xs[0].astype(np.float64)
    ms = np.mean(x * x, axis=tuple(a["axes"]), keepdims=True)
    return [(x / np.sqrt(ms + float(a["eps"]))).astype(xs[0].dtype)]


@TABLE.op("rms_norm", evaluate=_eval_rms_norm, attrs={"axes": required(INTS), "eps": required(FLOAT)})
def _rms_norm(ctx: InferContext) -> list[TensorType]:
    """x / sqrt(mean(x², axes) + eps) over the non-negative ``axes``, without weight
    (the frontend multiplies by it, so targets with a weightless fused op can use it)."""
    x = ctx.types[0]
    if not x.dtype.is_float:
        raise InferError("rms_norm: the operand must be a float tensor")
    axes = ctx.attrs["axes"]
    if not axes or any(not 0 <= a < x.rank for a in axes):
        raise InferError(f"rms_norm: axes {list(axes)} out of range for rank {x.rank}")
    return [x]
