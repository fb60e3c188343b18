"""The pass contract: ``Pass.__call__(graph) -> PassResult(graph, modified, stats)``."""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import ClassVar

import attrs

from t2n.errors import PassError
from t2n.ir import Graph


@attrs.frozen
class PassResult:
    """What a pass did. ``modified`` comes from the pass's own edits, never a guess."""

    graph: Graph
    modified: bool
    stats: Mapping[str, int] = attrs.field(factory=dict)


class Pass(abc.ABC):
    """A graph transformation with a name. Subclasses are small frozen option classes
    (``@attrs.frozen``) and implement :meth:`run`."""

    name: ClassVar[str] = ""

    @abc.abstractmethod
    def run(self, graph: Graph) -> PassResult:
        """Transform ``graph`` (in place or not) and say what changed."""

    def __call__(self, graph: Graph) -> PassResult:
        result = self.run(graph)
        if not isinstance(result, PassResult):
            raise PassError(
                f"pass {self.display_name} returned {type(result).__name__}, not a PassResult",
                pass_name=self.display_name,
            )
        return result

    @property
    def display_name(self) -> str:
        return self.name or type(self).__name__


def replace_with_values(graph: Graph, op: object, values: list[object]) -> None:
    """Replace every output of ``op`` by ``values`` and remove ``op``.

    A replacement created after ``op`` (by the pass itself) takes over the old
    output's name, so printed IR stays readable and graph outputs keep their names.
    """
    from t2n.ir import Op, Value

    assert isinstance(op, Op)
    renames: list[tuple[Value, str]] = []
    for old, new in zip(op.outputs, values):
        assert isinstance(new, Value)
        graph.replace_all_uses_with(old, new)
        if new.producer is not None and new.producer.seq > op.seq:
            renames.append((new, old.name))
    graph.remove(op)
    for new, name in renames:
        graph.rename(new, name)
