"""The SSA graph that owns values and ops (:mod:`t2n.ir.nodes`).

Structure lives in one place. Each :class:`Value` owns its use-list; a private
networkx DiGraph indexes producer→consumer edges for ordering and analyses.
Only :class:`Graph` methods edit either, so the two never disagree
(``t2n.ir.verify`` checks that they don't).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import networkx as nx
import numpy as np

from t2n.ir.graph_info import GraphInfo
from t2n.ir.nodes import GraphEditError, Op, SourceLoc, Value
from t2n.ir.printer import print_graph
from t2n.ir.schema import InferContext, OpSchema, OpSet, Trait
from t2n.ir.types import TensorType

KNOWN_VALUE_MAX_ELEMENTS = 64
"""Integer/bool results up to this size are evaluated during inference (shape arithmetic)."""


_NAME_RE = re.compile(r"[^A-Za-z0-9_]")


def _seq_of(op: Op) -> int:
    return op.seq


def sanitize_name(hint: str) -> str:
    """An identifier for ``hint``: letters, digits and underscores, not starting with a digit."""
    name = _NAME_RE.sub("_", hint).strip("_") or "v"
    if name[0].isdigit():
        name = "v" + name
    return name


class _NameSet(set[str]):
    """The graph's value names, and per base name the lowest ``_N`` suffix that may be
    free (every lower one is taken), so that :meth:`Graph.unique_name` gives the same
    names as a search from ``_1`` in constant time (the search made lowering
    quadratic in the number of ops sharing a hint)."""

    def __init__(self) -> None:
        super().__init__()
        self.next_suffix: dict[str, int] = {}

    def discard(self, name: object, /) -> None:
        super().discard(name)
        base, _, suffix = str(name).rpartition("_")
        if base and suffix.isdigit() and self.next_suffix.get(base, 1) > int(suffix):
            self.next_suffix[base] = int(suffix)


class Graph:
    """A typed SSA graph. See the module docstring for who may edit what."""

    def __init__(self, name: str = "main", opset: OpSet | None = None) -> None:
        self.name = sanitize_name(name)
        self.opset = opset if opset is not None else OpSet.default()
        self._inputs: list[Value] = []
        self._outputs: list[Value] = []
        self._ops: dict[Op, None] = {}
        self._nx: nx.DiGraph = nx.DiGraph()
        self._names: _NameSet = _NameSet()
        self._seq = itertools.count()
        self._order: list[Op] | None = None
        self._edits = 0
        self.info = GraphInfo()

    @property
    def edits(self) -> int:
        """How many structural edits the graph has had: every op created or removed,
        input pointed elsewhere, value renamed, graph input added or retyped, output
        list changed and value retyped by :meth:`reinfer` adds one. Passes are checked
        against it: ``Pass.__call__`` compares it with the ``modified`` a pass reports."""
        return self._edits

    # -- reading ------------------------------------------------------------------
    @property
    def inputs(self) -> tuple[Value, ...]:
        return tuple(self._inputs)

    @property
    def outputs(self) -> tuple[Value, ...]:
        return tuple(self._outputs)

    def __len__(self) -> int:
        return len(self._ops)

    def __str__(self) -> str:
        return print_graph(self)

    def __contains__(self, op: object) -> bool:
        return op in self._ops

    def ops(self) -> list[Op]:
        """Ops in a deterministic topological order (creation order where free)."""
        if self._order is None:
            self._order = self._creation_order_if_topological()
        if self._order is None:
            self._order = list(
                nx.lexicographical_topological_sort(self._nx, key=lambda op: op.seq)
            )
        return list(self._order)

    def _creation_order_if_topological(self) -> list[Op] | None:
        """The ops in creation order when every op's inputs come from earlier ops (the
        usual case: rewrites rarely point an op at a later one), else None. That order is
        then exactly the lexicographical topological sort, found in one linear scan
        instead of a heap-based sort."""
        order = sorted(self._ops, key=_seq_of)
        for op in order:
            seq = op.seq
            for v in op._inputs:
                p = v.producer
                if p is not None and p.seq >= seq:
                    return None
        return order

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops())

    def values(self) -> Iterator[Value]:
        yield from self._inputs
        for op in self.ops():
            yield from op.outputs

    def users(self, value: Value) -> list[Op]:
        seen: dict[Op, None] = {}
        for op, _ in value._uses:
            seen[op] = None
        return list(seen)

    def is_output(self, value: Value) -> bool:
        return any(v is value for v in self._outputs)

    def successors(self, op: Op) -> list[Op]:
        return sorted(self._nx.successors(op), key=lambda o: o.seq)

    def predecessors(self, op: Op) -> list[Op]:
        return sorted(self._nx.predecessors(op), key=lambda o: o.seq)

    # -- naming -------------------------------------------------------------------
    def unique_name(self, hint: str) -> str:
        base = sanitize_name(hint)
        name = base
        if name in self._names:
            i = self._names.next_suffix.get(base, 1)
            name = f"{base}_{i}"
            while name in self._names:
                i += 1
                name = f"{base}_{i}"
            self._names.next_suffix[base] = i + 1
        self._names.add(name)
        return name

    def rename(self, value: Value, hint: str) -> None:
        old = value.name
        self._names.discard(old)
        value.name = self.unique_name(hint)
        if value.name != old:
            self._edits += 1

    # -- building -----------------------------------------------------------------
    def add_input(self, type: TensorType, name: str) -> Value:
        v = Value(type, self.unique_name(name))
        self._inputs.append(v)
        self._edits += 1
        return v

    def remove_input(self, value: Value) -> None:
        """Drop a graph input nobody reads any more (e.g. a state a stateful op now keeps)."""
        if not any(v is value for v in self._inputs):
            raise GraphEditError(f"%{value.name} is not a graph input")
        if value._uses or self.is_output(value):
            raise GraphEditError(f"cannot remove input %{value.name}: it still has users")
        self._inputs = [v for v in self._inputs if v is not value]
        self._names.discard(value.name)
        self._edits += 1

    def set_input_type(self, value: Value, type: TensorType) -> None:
        """Change a graph input's type (e.g. to make an axis symbolic); call :meth:`reinfer` after."""
        if not any(v is value for v in self._inputs):
            raise GraphEditError(f"%{value.name} is not a graph input")
        if value.type != type:
            value.type = type
            self._edits += 1

    def set_outputs(self, values: Sequence[Value]) -> None:
        new = list(values)
        if len(new) != len(self._outputs) or any(a is not b for a, b in zip(new, self._outputs)):
            self._outputs = new
            self._edits += 1

    def create_op(
        self,
        kind: str | OpSchema,
        inputs: Sequence[Value],
        attrs: Mapping[str, Any] | None = None,
        *,
        out_types: Sequence[TensorType] | None = None,
        names: Sequence[str] | None = None,
        loc: SourceLoc | None = None,
    ) -> Op:
        """Create an op, infer its output types (unless given) and index it."""
        schema = kind if isinstance(kind, OpSchema) else self.opset.get(kind)
        for v in inputs:
            if not isinstance(v, Value):
                raise GraphEditError(f"input of {schema.name} is not a Value: {v!r}")
        attrs_ = dict(attrs or {})
        op = Op(schema, tuple(inputs), (), attrs_, loc or SourceLoc(), next(self._seq))
        types, known = self._infer(schema, op.inputs, attrs_)
        if out_types is not None:
            if len(out_types) != len(types):
                raise GraphEditError(f"{schema.name}: {len(out_types)} types for {len(types)} outputs")
            types = list(out_types)
        hints = list(names) if names is not None else [schema.name] * len(types)
        op._outputs = tuple(
            Value(t, self.unique_name(h), op, i, k)
            for i, (t, h, k) in enumerate(zip(types, hints, known))
        )
        self._ops[op] = None
        self._nx.add_node(op)
        for i, v in enumerate(op.inputs):
            v._uses.append((op, i))
            if v.producer is not None:
                self._add_edge(v.producer, op)
        self._order = None
        self._edits += 1
        return op

    def _add_edge(self, a: Op, b: Op) -> None:
        if self._nx.has_edge(a, b):
            self._nx[a][b]["n"] += 1
        else:
            self._nx.add_edge(a, b, n=1)

    def _drop_edge(self, a: Op, b: Op) -> None:
        data = self._nx[a][b]
        data["n"] -= 1
        if data["n"] == 0:
            self._nx.remove_edge(a, b)

    # -- editing ------------------------------------------------------------------
    def set_op_input(self, op: Op, index: int, value: Value) -> None:
        old = op._inputs[index]
        if old is value:
            return
        old._uses.remove((op, index))
        if old.producer is not None:
            self._drop_edge(old.producer, op)
        op._inputs = op._inputs[:index] + (value,) + op._inputs[index + 1 :]
        value._uses.append((op, index))
        if value.producer is not None:
            self._add_edge(value.producer, op)
        self._order = None
        self._edits += 1

    def replace_all_uses_with(self, old: Value, new: Value, *, outputs: bool = True) -> int:
        """Point every reader of ``old`` (and graph outputs, unless told not to) at ``new``."""
        if old is new:
            return 0
        count = 0
        for op, idx in list(old._uses):
            self.set_op_input(op, idx, new)
            count += 1
        if outputs:
            for i, v in enumerate(self._outputs):
                if v is old:
                    self._outputs[i] = new
                    self._edits += 1
                    count += 1
        return count

    def remove(self, op: Op) -> None:
        """Remove an op whose outputs nobody reads. Refuses otherwise."""
        for v in op.outputs:
            if v._uses or self.is_output(v):
                raise GraphEditError(
                    f"cannot remove {op.kind}: %{v.name} still has users"
                )
        for i, v in enumerate(op.inputs):
            v._uses.remove((op, i))
        for v in op.outputs:
            self._names.discard(v.name)
        self._nx.remove_node(op)
        del self._ops[op]
        self._order = None
        self._edits += 1

    def replace_op(
        self,
        op: Op,
        kind: str | OpSchema | None = None,
        inputs: Sequence[Value] | None = None,
        attrs: Mapping[str, Any] | None = None,
    ) -> Op:
        """Swap ``op`` for a new op with the same output names; readers follow."""
        new = self.create_op(
            kind if kind is not None else op.schema,
            list(inputs) if inputs is not None else list(op.inputs),
            attrs if attrs is not None else op.attrs,
            names=[v.name + "_new" for v in op.outputs],
            loc=op.loc,
        )
        names = [v.name for v in op.outputs]
        for old_v, new_v in zip(op.outputs, new.outputs):
            self.replace_all_uses_with(old_v, new_v)
        self.remove(op)
        for n, v in zip(names, new.outputs):
            self._names.discard(v.name)
            v.name = n
            self._names.add(n)
        return new

    # -- inference ----------------------------------------------------------------
    def _infer(
        self, schema: OpSchema, inputs: Sequence[Value], attrs: Mapping[str, Any]
    ) -> tuple[list[TensorType], list[np.ndarray | None]]:
        ctx = InferContext(
            tuple(v.type for v in inputs), attrs, tuple(v.known for v in inputs)
        )
        types = list(schema.infer(ctx))
        known: list[np.ndarray | None] = [None] * len(types)
        if schema.has(Trait.CONSTANT_LIKE) and "data" in attrs and len(types) == 1:
            data = attrs["data"]
            if _knowable(types[0]) and hasattr(data, "values"):
                known = [np.asarray(data.values())]
        elif schema.known is not None:
            known = [
                k if k is None or _knowable(t) else None
                for k, t in zip(schema.known(ctx), types)
            ]
        elif (
            schema.evaluate is not None
            and schema.has(Trait.PURE)
            and not schema.has(Trait.STATEFUL)
            and len(inputs_known := [v.known for v in inputs if v.known is not None]) == len(inputs)
            and all(_knowable(t) for t in types)
        ):
            try:
                outs = schema.evaluate(inputs_known, attrs)
                known = [np.asarray(o) for o in outs]
            except (TypeError, ValueError, ArithmeticError):
                known = [None] * len(types)
        return types, known

    def reinfer(self, ops: Iterable[Op] | None = None) -> int:
        """Recompute output types and known values (all ops in order by default).

        Returns how many values changed type or known value.
        """
        changed = 0
        for op in ops if ops is not None else self.ops():
            types, known = self._infer(op.schema, op.inputs, op.attrs)
            for v, t, k in zip(op.outputs, types, known):
                if v.type != t or not _same_known(v.known, k):
                    changed += 1
                    self._edits += 1
                v.type = t
                v.known = k
        return changed


def _knowable(t: TensorType) -> bool:
    if t.dtype.is_float or not t.shape.is_static:
        return False
    return t.shape.static_numel() <= KNOWN_VALUE_MAX_ELEMENTS


def _same_known(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.shape == b.shape and bool(np.all(a == b))


def is_constant(v: Value) -> bool:
    """Held by a constant-like op (a const or a weight; checked without reading the data)."""
    p = v.producer
    return p is not None and p.has(Trait.CONSTANT_LIKE) and "data" in p.attrs


def constant_data(v: Value) -> np.ndarray | None:
    """The value of ``v`` if a constant-like op holds it (a const or a weight), else None."""
    if not is_constant(v):
        return None
    assert v.producer is not None
    return np.asarray(v.producer.attrs["data"].values())
