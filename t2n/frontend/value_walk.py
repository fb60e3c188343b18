"""One depth-first walk over the values of a TorchScript graph, each value visited once:
the searches that follow data forward (to its uses) or back (to its producers) differ only
in which values they push next."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch


class ValueWalk:
    """``for v in ValueWalk(start): ... walk.push(next_values)``: yields every value
    pushed (and the start) once, the last pushed first."""

    def __init__(self, *starts: torch._C.Value) -> None:
        self._todo = list(starts)
        self._seen: set[int] = set()

    def push(self, values: Iterable[torch._C.Value]) -> None:
        """Values to visit after the current one (those already visited are skipped)."""
        self._todo.extend(values)

    def __iter__(self) -> Iterator[torch._C.Value]:
        while self._todo:
            v = self._todo.pop()
            if v.unique() in self._seen:
                continue
            self._seen.add(v.unique())
            yield v
