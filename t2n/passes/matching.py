"""What rewrite passes ask of the graph around a pattern they match: which op makes a
value, whether one op alone reads it, and the first op a matcher accepts."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from t2n.ir import Graph, Op, Value

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
