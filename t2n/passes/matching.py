"""What rewrite passes ask of the graph around a pattern they match (which op makes a
value, whether one op alone reads it, the first op a matcher accepts), and how the
value they build takes the matched one's place."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from t2n.ir import Graph, Op, Value
from t2n.passes.dead_node_elimination import DeadNodeElimination

_T = TypeVar("_T")


def only_reader(graph: Graph, v: Value, reader: Op) -> bool:
    """``reader`` is the only op reading ``v`` and ``v`` is no graph output."""
    return not graph.is_output(v) and all(user is reader for user, _ in v.uses)


def producer_of(v: Value, kind: str) -> Op | None:
    """The op of ``kind`` that makes ``v``, if that is what makes it."""
    p = v.producer
    return p if p is not None and p.kind == kind else None


def first_match(graph: Graph, match: Callable[[Graph, Op], _T | None]) -> tuple[Op, _T] | None:
    """The first op (in graph order) that ``match`` accepts, with what it found."""
    for op in graph.ops():
        found = match(graph, op)
        if found is not None:
            return op, found
    return None


def take_place(graph: Graph, old: Value, new: Value) -> None:
    """``new`` is read wherever ``old`` was and takes its name (so graph.nnef keeps the
    names it had); the ops left unread are dropped."""
    name = old.name
    graph.replace_all_uses_with(old, new)
    DeadNodeElimination()(graph)
    graph.rename(new, name)
