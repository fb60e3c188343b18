"""Data-holding ops and dtype changes: const, variable, cast, identity."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from t2n.ir.attributes import DATA, DTYPE, NO_ATTRS, STR, required
from t2n.ir.dtypes import DType
from t2n.ir.infer_utils import tensor
from t2n.ir.schema import InferContext, OpTable, Trait
from t2n.ir.tensor_data import TensorData, bf16_bits_to_f32
from t2n.ir.types import TensorType

TABLE = OpTable("core")

_CONST = (Trait.PURE, Trait.CONSTANT_LIKE)


def _data_type(ctx: InferContext) -> list[TensorType]:
    data: TensorData = ctx.attrs["data"]
    return [tensor(data.dtype, data.shape)]


def _eval_data(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> list[np.ndarray]:
    return [attrs["data"].values()]


TABLE.op("const", evaluate=_eval_data, traits=_CONST, doc="A literal tensor (attr data).",
         attrs={"data": required(DATA)})(_data_type)
TABLE.op(
    "variable",
    evaluate=_eval_data,
    traits=_CONST,
    doc="A named parameter (attrs data, label): written as a .dat tensor.",
    attrs={"data": required(DATA), "label": required(STR)},
)(_data_type)


def cast_array(x: np.ndarray, to: DType) -> np.ndarray:
    """numpy conversion with torch's semantics (float→int truncates, nonzero→True)."""
    if to is DType.BOOL:
        return np.asarray(x != 0)
    if to is DType.BF16:
        f = np.asarray(x, dtype=np.float32)
        bits = f.view(np.uint32)
        rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
        return bf16_bits_to_f32((rounded >> np.uint32(16)).astype(np.uint16))
    if x.dtype == object:
        return x if to.is_int else np.asarray(x.astype(np.int64), dtype=to.numpy)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(x).astype(to.numpy)


@TABLE.op("cast", evaluate=lambda xs, a: [cast_array(xs[0], a["to"])], attrs={"to": required(DTYPE)})
def _cast(ctx: InferContext) -> list[TensorType]:
    """Convert to dtype ``to``."""
    return [ctx.types[0].with_dtype(ctx.attrs["to"])]


@TABLE.op("identity", evaluate=lambda xs, a: [xs[0]], attrs=NO_ATTRS)
def _identity(ctx: InferContext) -> list[TensorType]:
    """The input, unchanged (used where an output must be a distinct value)."""
    return [ctx.types[0]]
