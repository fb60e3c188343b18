"""Structural and type checks of a Graph, run after every pass in tests and debug mode."""

from __future__ import annotations

import networkx as nx

from t2n.errors import IRError
from t2n.ir.attributes import attr_problems
from t2n.ir.graph import Graph
from t2n.ir.nodes import Op, Value


class IRVerificationError(IRError, ValueError):
    """The graph breaks an IR invariant; the message lists every problem found."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("IR verification failed:\n  " + "\n  ".join(problems))


def verify(graph: Graph, *, check_types: bool = True) -> None:
    """Raise :class:`IRVerificationError` unless the graph is well formed.

    Checks: one producer per value; use-lists agree with op inputs; the private
    networkx index agrees with both; no cycles; unique names; outputs defined; each
    op's attributes are those its schema declares (names, required ones, kinds of
    value); and (``check_types``) stored types equal freshly inferred ones.
    """
    problems: list[str] = []
    ops = list(graph._ops)
    defined = _check_producers(graph, ops, problems)
    expected_edges = _check_uses(ops, defined, problems)
    _check_index(graph, set(ops), expected_edges, problems)
    _check_attrs(ops, problems)
    for v in graph.outputs:
        if id(v) not in defined:
            problems.append(f"output %{v.name} is not defined in the graph")
    if check_types and not problems:
        _check_types(graph, problems)
    if problems:
        raise IRVerificationError(problems)


def _check_producers(graph: Graph, ops: list[Op], problems: list[str]) -> dict[int, Value]:
    """Every value defined once (by an input or one op output), under a unique name."""
    defined: dict[int, Value] = {id(v): v for v in graph.inputs}
    for v in graph.inputs:
        if v.producer is not None:
            problems.append(f"input %{v.name} has a producer")
    for op in ops:
        for i, v in enumerate(op.outputs):
            if v.producer is not op or v.index != i:
                problems.append(f"%{v.name}: producer/index do not point back to {op.kind}")
            if id(v) in defined:
                problems.append(f"%{v.name} is produced twice")
            defined[id(v)] = v
    names: dict[str, Value] = {}
    for v in defined.values():
        if v.name in names and names[v.name] is not v:
            problems.append(f"name %{v.name} is used by two values")
        names[v.name] = v
    return defined


def _check_uses(ops: list[Op], defined: dict[int, Value], problems: list[str]) -> dict[tuple[int, int], int]:
    """Op inputs and use-lists agree; returns the producer → user edge counts they imply."""
    op_set = set(ops)
    expected_edges: dict[tuple[int, int], int] = {}
    for op in ops:
        for i, v in enumerate(op.inputs):
            if id(v) not in defined:
                problems.append(f"{op.kind} reads %{v.name}, which is not in the graph")
                continue
            if (op, i) not in v._uses:
                problems.append(f"%{v.name}: use-list misses {op.kind} input {i}")
            if v.producer is not None:
                key = (id(v.producer), id(op))
                expected_edges[key] = expected_edges.get(key, 0) + 1
    for v in defined.values():
        for user, idx in v._uses:
            if user not in op_set:
                problems.append(f"%{v.name} lists a user that is not in the graph ({user.kind})")
            elif idx >= len(user.inputs) or user.inputs[idx] is not v:
                problems.append(f"%{v.name}: stale use entry ({user.kind} input {idx})")
    return expected_edges


def _check_index(graph: Graph, op_set: set[Op], expected_edges: dict[tuple[int, int], int],
                 problems: list[str]) -> None:
    """The private networkx index holds exactly the ops and edges, and no cycle."""
    if set(graph._nx.nodes) != op_set:
        problems.append("networkx index nodes differ from the ops")
    actual_edges = {(id(a), id(b)): d["n"] for a, b, d in graph._nx.edges(data=True)}
    if actual_edges != expected_edges:
        problems.append("networkx index edges differ from the use-lists")
    if not nx.is_directed_acyclic_graph(graph._nx):
        problems.append("the graph has a cycle")


def _check_attrs(ops: list[Op], problems: list[str]) -> None:
    """Each op's attributes against those its schema declares (a schema declaring
    nothing, ``attrs=None``, is not checked)."""
    for op in ops:
        if op.schema.attrs is not None:
            problems.extend(f"{_where(op)}: {p}" for p in attr_problems(op.schema.attrs, op.attrs))


def _where(op: Op) -> str:
    return f"{op.kind} -> %{op.outputs[0].name if op.outputs else '?'}"


def _check_types(graph: Graph, problems: list[str]) -> None:
    """Stored output types equal what each op's inference gives now."""
    for op in graph.ops():
        try:
            types, _ = graph._infer(op.schema, op.inputs, op.attrs)
        except (IRError, ValueError, TypeError, LookupError, ArithmeticError) as exc:
            problems.append(f"{_where(op)}: inference fails: {exc}")
            continue
        for v, t in zip(op.outputs, types):
            if v.type != t:
                problems.append(f"%{v.name}: stored type {v.type} but {op.kind} infers {t}")
