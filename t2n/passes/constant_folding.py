"""Evaluate ops whose inputs are all constant, with the IR's numpy evaluator table."""

from __future__ import annotations

import attrs
import numpy as np

from t2n.ir import ArrayData, Builder, DType, Graph, Op, Trait, Value
from t2n.ir.dims import dim_symbols, is_data_symbol
from t2n.passes.rewrite import Pattern, PatternPass, Patterns


@attrs.frozen
class ConstantFolding(PatternPass):
    """Replace a pure op by constants when its result can be computed now.

    Two cases: every input comes from a constant-like op (and the result is at most
    ``max_bytes``), or inference already knows the result (shape arithmetic, which
    may be symbolic). Weights are never copied into bigger folded tensors.
    """

    max_bytes: int = 1 << 20

    name = "constant-folding"

    def patterns(self) -> Patterns:
        return [Pattern("folded", self._values, _constants)]

    def _values(self, graph: Graph, op: Op) -> list[np.ndarray] | None:
        """What ``op`` computes, when it can be computed now."""
        return self._evaluate(op) if self._foldable(op) else None

    def _foldable(self, op: Op) -> bool:
        if not op.has(Trait.PURE) or op.has(Trait.CONSTANT_LIKE) or op.has(Trait.STATEFUL):
            return False
        return op.schema.evaluate is not None or all(v.known is not None for v in op.outputs)

    def _evaluate(self, op: Op) -> list[np.ndarray] | None:
        known = [v.known for v in op.outputs]
        if all(k is not None for k in known):
            if any(_holds_data_length(k) for k in known):
                return None  # a length the engine names only while running: computed there
            return [k for k in known if k is not None]
        producers = [v.producer for v in op.inputs]
        constants = [p for p in producers if p is not None and p.has(Trait.CONSTANT_LIKE)]
        if len(constants) != len(producers):
            return None
        out_bytes = 0
        for v in op.outputs:
            if not v.type.shape.is_static:
                return None
            out_bytes += v.type.shape.static_numel() * v.type.dtype.itemsize
        if out_bytes > self.max_bytes or op.schema.evaluate is None:
            return None
        inputs = [p.attrs["data"].values() for p in constants]
        try:
            outs = op.schema.evaluate(inputs, op.attrs)
        except (ValueError, TypeError, ArithmeticError):
            return None
        result = []
        for v, o in zip(op.outputs, outs):
            arr = np.asarray(o)
            if v.type.dtype is DType.BF16:
                return None
            result.append(arr)
        return result


def _holds_data_length(known: np.ndarray | None) -> bool:
    """Sizes computed from tensor data (``y.shape[1]`` of a length-regulated ``y``) have no
    constant form: a graph can only read them from the tensor."""
    return known is not None and known.dtype == object and any(
        is_data_symbol(s) for s in dim_symbols(known.reshape(-1).tolist()))


def _constants(graph: Graph, op: Op, values: list[np.ndarray]) -> dict[Value, Value]:
    """A constant under each output's name, of the output's type, in its place."""
    b = Builder(graph, op.loc)
    consts: dict[Value, Value] = {}
    for v, data in zip(op.outputs, values):
        arr = np.asarray(data)
        if arr.dtype != object:
            arr = np.require(arr.astype(v.type.dtype.numpy, copy=False), requirements="C")
        consts[v] = b.op("const", name=v.name, data=ArrayData(arr, v.type.dtype))
    return consts
