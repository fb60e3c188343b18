"""What the three f32-forcing passes share: find regions, rewrite them, say what changed."""

from __future__ import annotations

import abc
import logging

from t2n.errors import PassError
from t2n.ir import Graph
from t2n.passes.base import Pass, PassResult
from t2n.passes.precision.regions import Region, is_reduced, rewrite_regions

log = logging.getLogger("t2n")


class ForceF32Pass(Pass):
    """A pass that computes the regions :meth:`find` returns in f32 (see
    :mod:`t2n.passes.precision.regions`). Its stats count regions (also by label), casts
    inserted and boundaries shared with a neighbouring region; the same summary is logged
    at INFO level on the ``t2n`` logger."""

    @abc.abstractmethod
    def find(self, graph: Graph) -> list[Region]:
        """The disjoint regions of ``graph`` this pass acts on, in topological order."""

    def run(self, graph: Graph) -> PassResult:
        before = graph.edits
        rewriter = rewrite_regions(graph, self.find(graph))
        if rewriter.labels:
            log.info("%s", rewriter.summary(self.display_name))
        return PassResult(graph, graph.edits != before, rewriter.stats())

    def ensures(self, graph: Graph) -> None:
        """No region the pass finds still computes in a reduced type."""
        left = [r for r in self.find(graph) if is_reduced(r)]
        if left:
            where = ", ".join(f"{r.label} at %{r.ops[-1].outputs[0].name}" for r in left[:5])
            raise PassError(f"{self.display_name}: {len(left)} region(s) still compute in f16 after the "
                            f"pass: {where}", pass_name=self.display_name)
