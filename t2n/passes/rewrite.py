"""The rewrite driver every pattern pass uses.

A :class:`Pattern` says what it matches around one op (``match(graph, op)``: what the
rewrite needs, or ``None``) and what takes that op's place (``rewrite(graph, op,
found)``: the new value for the op's output, or a mapping old value → new value when
several values are replaced). :func:`apply_patterns` owns the rest: it visits the ops in
graph order (a worklist), tries the patterns in order on each, puts the new values in
place of the old ones (every reader rewired; a value the rewrite made takes the old
value's name, so graph.nnef keeps its names), drops only the ops the replacement left
unread, and sweeps again while a sweep changed something, so a match that a rewrite
makes possible is found too. It returns how many times each pattern was applied:
:class:`PatternPass` turns that into the pass's stats and change flag.

Helpers for matchers: :func:`producer_of` (the op of a kind that makes a value) and
:func:`only_reader` (an op is the one reader of a value, which is no graph output).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import attrs

from t2n.errors import PassError
from t2n.ir import Graph, Op, Trait, Value
from t2n.passes.base import Pass, PassResult

T = TypeVar("T")

@attrs.frozen
class Rewritten:
    """A replacement that also retires ops the driver would keep: ``values`` maps old
    value → new value; ``erased`` are ops (a kept state, say, which the driver never
    drops on its own) to remove once the replacement leaves them unread."""

    values: Mapping[Value, Value]
    erased: Sequence[Op] = ()
    renamed: bool = True
    """New values take the names of the values they replace (False: they keep their own,
    e.g. the name of a state a runtime sees)."""


Replacement = Value | Mapping[Value, Value] | Rewritten
"""What a rewrite gives: the value that takes the place of the matched op's output,
old value → new value for each value it replaces, or a :class:`Rewritten`."""


@attrs.frozen
class Pattern(Generic[T]):
    """One rewrite: ``match`` finds it around an op, ``rewrite`` builds its replacement;
    ``counted`` names it in the pass's stats."""

    counted: str
    match: Callable[[Graph, Op], T | None]
    rewrite: Callable[[Graph, Op, T], Replacement]


Patterns = Sequence[Pattern[Any]]
"""A pass's patterns, each with the type of what its own ``match`` finds."""


def apply_patterns(graph: Graph, patterns: Patterns, *, max_sweeps: int = 16) -> Counter[str]:
    """Rewrite ``graph`` with ``patterns`` until no op matches; how many times each was
    applied (by ``counted``). An op the replacement could not drop is not matched again."""
    counts: Counter[str] = Counter()
    settled: set[Op] = set()
    for _ in range(max_sweeps):
        if not _sweep(graph, patterns, counts, settled):
            return counts
    raise PassError(f"patterns {', '.join(p.counted for p in patterns)} still match after {max_sweeps} sweeps")


def _sweep(graph: Graph, patterns: Sequence[Pattern[Any]], counts: Counter[str], settled: set[Op]) -> bool:
    changed = False
    work = deque(graph.ops())
    while work:
        op = work.popleft()
        if op not in graph or op in settled:
            continue
        for pattern in patterns:
            found = pattern.match(graph, op)
            if found is None:
                continue
            replace(graph, op, pattern.rewrite(graph, op, found))
            counts[pattern.counted] += 1
            changed = True
            if op in graph:
                settled.add(op)
            break
    return changed


def replace(graph: Graph, op: Op, replacement: Replacement) -> None:
    """Put each new value in place of its old one (``replacement`` for ``op``'s output, or
    a mapping); a new value made after ``op`` takes the old value's name; the ops left
    unread are dropped."""
    erased: Sequence[Op] = ()
    renamed = True
    if isinstance(replacement, Rewritten):
        pairs, erased, renamed = dict(replacement.values), replacement.erased, replacement.renamed
    else:
        pairs = {op.output: replacement} if isinstance(replacement, Value) else dict(replacement)
    names = [(new, old.name) for old, new in pairs.items() if new is not old and _made_after(new, op)
             and renamed]
    for old, new in pairs.items():
        if new is not old:
            graph.replace_all_uses_with(old, new)
    drop_unread(graph, [old.producer for old in pairs if old.producer is not None])
    for gone in erased:
        _erase(graph, gone)
    for new, name in names:
        if new.name != name:
            graph.rename(new, name)


def _erase(graph: Graph, op: Op) -> None:
    if op not in graph:
        return
    if any(v.uses or graph.is_output(v) for v in op.outputs):
        raise PassError(f"a rewrite asked to erase the {op.kind} op making %{op.output.name}, which is still read")
    operands = [v.producer for v in op.inputs if v.producer is not None]
    graph.remove(op)
    drop_unread(graph, operands)


def _made_after(v: Value, op: Op) -> bool:
    return v.producer is not None and v.producer.seq > op.seq


def drop_unread(graph: Graph, ops: Iterable[Op]) -> int:
    """Remove ``ops`` that nothing reads any more, then the producers of their operands
    that this leaves unread, and so on (pure, stateless ops only; graph outputs stay)."""
    todo = list(ops)
    removed = 0
    while todo:
        op = todo.pop()
        if op not in graph or not op.has(Trait.PURE) or op.has(Trait.STATEFUL):
            continue
        if any(v.uses or graph.is_output(v) for v in op.outputs):
            continue
        operands = [v.producer for v in op.inputs if v.producer is not None]
        graph.remove(op)
        removed += 1
        todo.extend(operands)
    return removed


class PatternPass(Pass):
    """A pass that is its patterns: it reports what :func:`apply_patterns` counted
    (``stats`` by each pattern's ``counted``; modified when anything matched)."""

    def patterns(self) -> Patterns:
        raise NotImplementedError(f"{type(self).__name__} defines no patterns()")

    def run(self, graph: Graph) -> PassResult:
        counts = apply_patterns(graph, self.patterns())
        return PassResult(graph, sum(counts.values()) > 0, dict(counts))


def producer_of(v: Value, kind: str) -> Op | None:
    """The op of ``kind`` that makes ``v``, if that is what makes it."""
    p = v.producer
    return p if p is not None and p.kind == kind else None


def only_reader(graph: Graph, v: Value, reader: Op) -> bool:
    """``reader`` is the only op reading ``v`` and ``v`` is no graph output."""
    return not graph.is_output(v) and all(user is reader for user, _ in v.uses)


__all__ = ["Pattern", "PatternPass", "Patterns", "Replacement", "Rewritten", "apply_patterns", "drop_unread", "only_reader",
           "producer_of", "replace"]
