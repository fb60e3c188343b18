"""A small helper for creating ops with a current source location."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from t2n.ir.dims import Dim, Sym
from t2n.ir.dtypes import DType
from t2n.ir.graph import Graph
from t2n.ir.nodes import SourceLoc, Value
from t2n.ir.tensor_data import ArrayData, TensorData


def dims_array(values: Sequence[Dim]) -> np.ndarray:
    """A 1-D i64 array of dims: int64 when static, an object array when symbolic."""
    if any(isinstance(v, Sym) for v in values):
        out = np.empty(len(values), dtype=object)
        out[:] = list(values)
        return out
    return np.asarray([int(v) for v in values], dtype=np.int64).reshape(len(values))


@attrs.define
class Builder:
    graph: Graph
    loc: SourceLoc = SourceLoc()

    def at(self, loc: SourceLoc) -> Builder:
        return Builder(self.graph, loc)

    def op(self, kind: str, *inputs: Value, name: str | None = None, **attrs_: Any) -> Value:
        """Create a single-output op and return its output."""
        op = self.graph.create_op(
            kind, inputs, attrs_, names=[name] if name else None, loc=self.loc
        )
        return op.output

    def multi(
        self, kind: str, *inputs: Value, names: Sequence[str] | None = None, **attrs_: Any
    ) -> tuple[Value, ...]:
        return self.graph.create_op(kind, inputs, attrs_, names=names, loc=self.loc).outputs

    def const(
        self, value: Any, dtype: DType | None = None, name: str | None = None
    ) -> Value:
        """A literal tensor from a numpy array or Python scalar/list (dims allowed for ints)."""
        if isinstance(value, np.ndarray):
            arr = value
        elif isinstance(value, (list, tuple)) and any(isinstance(v, Sym) for v in value):
            arr = dims_array(value)
        elif isinstance(value, Sym):
            arr = np.empty((), dtype=object)
            arr[()] = value
        else:
            arr = np.asarray(value)
        if dtype is None:
            if arr.dtype == object:
                dtype = DType.I64
            elif arr.dtype == np.float64 and not isinstance(value, np.ndarray):
                dtype = DType.F32
            else:
                dtype = DType.from_numpy(arr.dtype)
        if arr.dtype != object:
            arr = np.require(arr.astype(dtype.numpy, copy=False), requirements="C")
        return self.op("const", name=name or "c", data=ArrayData(arr, dtype))

    def ints(self, values: Sequence[Dim], name: str | None = None) -> Value:
        """A 1-D i64 constant (symbolic entries allowed)."""
        return self.op("const", name=name or "ints", data=ArrayData(dims_array(values), DType.I64))

    def variable(self, data: TensorData, label: str, name: str | None = None) -> Value:
        return self.op("variable", name=name or label, data=data, label=label)

    def cast(self, x: Value, dtype: DType) -> Value:
        if x.type.dtype is dtype:
            return x
        return self.op("cast", x, to=dtype)
