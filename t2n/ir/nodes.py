"""The graph's nodes: SSA values, the ops that make them, and where in the model each
op came from. Their structure changes only through :class:`~t2n.ir.graph.Graph`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from t2n.errors import IRError
from t2n.ir.dims import dim_symbols
from t2n.ir.schema import OpSchema, Trait
from t2n.ir.types import TensorType


class GraphEditError(IRError, ValueError):
    """An edit that would break the graph's structure (e.g. removing a used op)."""


@attrs.frozen
class SourceLoc:
    """Where an op came from in the user's model."""

    module: str = ""
    aten: str = ""
    source: str = ""

    def __str__(self) -> str:
        parts = []
        if self.aten:
            parts.append(self.aten)
        parts.append(f"in module '{self.module}'" if self.module else "in the top-level module")
        if self.source:
            parts.append(f"at {self.source}")
        return " ".join(parts)


@attrs.define(eq=False, slots=True, repr=False)
class Value:
    """An SSA value: produced by exactly one op, or a graph input."""

    type: TensorType
    name: str
    producer: Op | None = None
    index: int = 0
    known: np.ndarray | None = None
    _uses: list[tuple[Op, int]] = attrs.field(factory=list)

    @property
    def dtype(self) -> Any:
        return self.type.dtype

    @property
    def shape(self) -> Any:
        return self.type.shape

    @property
    def rank(self) -> int:
        return len(self.type.shape)

    @property
    def uses(self) -> tuple[tuple[Op, int], ...]:
        """(op, input index) pairs that read this value."""
        return tuple(self._uses)

    def symbols(self) -> frozenset[str]:
        """The symbols this value's shape and known value (sizes computed from the
        inputs' symbolic axes) are written with."""
        found = self.type.shape.symbols()
        if self.known is not None and self.known.dtype == object:
            found |= dim_symbols(self.known.reshape(-1).tolist())
        return found

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


@attrs.define(eq=False, slots=True, repr=False)
class Op:
    """An operation. Its inputs, outputs and attributes change only through Graph."""

    schema: OpSchema
    _inputs: tuple[Value, ...]
    _outputs: tuple[Value, ...]
    _attrs: Mapping[str, Any]
    loc: SourceLoc
    seq: int

    @property
    def kind(self) -> str:
        return self.schema.name

    @property
    def inputs(self) -> tuple[Value, ...]:
        return self._inputs

    @property
    def outputs(self) -> tuple[Value, ...]:
        return self._outputs

    @property
    def output(self) -> Value:
        if len(self._outputs) != 1:
            raise GraphEditError(f"op {self.kind} has {len(self._outputs)} outputs; use .outputs")
        return self._outputs[0]

    @property
    def attrs(self) -> Mapping[str, Any]:
        return self._attrs

    def has(self, trait: Trait) -> bool:
        return trait in self.schema.traits

    def __repr__(self) -> str:
        ins = ", ".join(f"%{v.name}" for v in self._inputs)
        outs = ", ".join(f"%{v.name}" for v in self._outputs)
        return f"<Op {outs} = {self.kind}({ins})>"
