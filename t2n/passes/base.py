"""The pass contract: ``Pass.__call__(graph) -> PassResult(graph, modified, stats)``.

``Pass.__call__`` holds every pass to it, built-in or not:

- ``requires(graph)`` runs first and ``ensures(result.graph)`` after ``run``; both do
  nothing by default and refuse a graph by raising (a ``T2NError`` goes through as
  it is, anything else becomes a :class:`~t2n.errors.PassError` naming the pass);
- ``run`` must return a :class:`PassResult`;
- ``modified`` must say what happened. A pass edits the graph through its methods,
  which count every structural edit (:attr:`Graph.edits`); a pass that reports
  ``modified=False`` after an edit, or ``modified=True`` without one, raises
  :class:`~t2n.errors.PassError`. The second is refused too because a fixed-point
  pipeline repeats while something reports a change: a pass that claims changes it
  did not make would keep it sweeping until its bound. A pass that returns another
  graph object than the one it was given has changed the graph (``modified=True``).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from typing import ClassVar

import attrs

from t2n.errors import PassError, T2NError
from t2n.ir import Graph


@attrs.frozen
class PassResult:
    """What a pass did. ``modified`` comes from the pass's own edits, never a guess."""

    graph: Graph
    modified: bool
    stats: Mapping[str, int] = attrs.field(factory=dict)


class Pass(abc.ABC):
    """A graph transformation with a name. Subclasses are small frozen option classes
    (``@attrs.frozen``) and implement :meth:`run`; they may add :meth:`requires` and
    :meth:`ensures` checks. ``name`` is how a pipeline spec refers to the pass
    (see :func:`t2n.passes.parse_pipeline`)."""

    name: ClassVar[str] = ""
    interface: ClassVar[bool] = False
    """An interface pass (an artifact-level form such as a stateful cache): it runs after
    every other pass of the pipeline, the target's own forms included, and may remove graph
    inputs and outputs, keeping ``graph.info``'s reported names in step; ``compile`` then
    gives the artifact the interface the graph has (names, example inputs and, when no
    input was removed, PyTorch's outputs), through the same rendering and checks."""

    @abc.abstractmethod
    def run(self, graph: Graph) -> PassResult:
        """Transform ``graph`` (in place or not) and say what changed."""

    def requires(self, graph: Graph) -> None:
        """Precondition on the graph the pass is given; raise to refuse it."""
        return None

    def ensures(self, graph: Graph) -> None:
        """Postcondition on the graph the pass returns; raise if it does not hold."""
        return None

    def __call__(self, graph: Graph) -> PassResult:
        self._check("precondition", self.requires, graph)
        before = graph.edits
        result = self.run(graph)
        if not isinstance(result, PassResult):
            raise PassError(
                f"pass {self.display_name} returned {type(result).__name__}, not a PassResult",
                pass_name=self.display_name,
            )
        edited = result.graph is not graph or graph.edits != before
        if result.modified != edited:
            raise PassError(self._dishonest(result.modified, graph.edits - before), pass_name=self.display_name)
        self._check("postcondition", self.ensures, result.graph)
        return result

    def _check(self, what: str, check: Callable[[Graph], None], graph: Graph) -> None:
        try:
            check(graph)
        except T2NError:
            raise
        except Exception as exc:
            raise PassError(
                f"pass {self.display_name}: {what} failed: {type(exc).__name__}: {exc}",
                pass_name=self.display_name,
            ) from exc

    def _dishonest(self, said_modified: bool, edits: int) -> str:
        if said_modified:
            return (f"pass {self.display_name} reported modified=True but made no edit to the graph; "
                    "report modified=False when nothing changed (a fixed-point pipeline would "
                    "otherwise repeat it), and edit only through Graph methods")
        return (f"pass {self.display_name} reported modified=False but made {edits} edit(s) to the "
                "graph; report modified=True whenever it creates, removes, rewires, renames or "
                "retypes anything")

    @property
    def display_name(self) -> str:
        return self.name or type(self).__name__
