"""The last step of a plan: assertions about symbols the graph no longer has (a collapsed
batch, an input bound away) are dropped, as tract would otherwise warn about them."""

from __future__ import annotations

import attrs

from t2n.ir import Graph
from t2n.passes.base import Pass, PassResult
from t2n.passes.remodel.symbols import prune_assertions


@attrs.frozen
class PruneAssertions(Pass):
    name = "prune-assertions"

    def run(self, graph: Graph) -> PassResult:
        return PassResult(graph, False, {"dropped": prune_assertions(graph)})
