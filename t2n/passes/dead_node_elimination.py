"""Remove ops whose results nobody reads."""

from __future__ import annotations

import attrs

from t2n.ir import Graph, Trait
from t2n.passes.base import Pass, PassResult


@attrs.frozen
class DeadNodeElimination(Pass):
    """Drop pure ops (including constants and variables) with no readers and no graph
    output among their results. Stateful ops are kept."""

    name = "dead-node-elimination"

    def run(self, graph: Graph) -> PassResult:
        removed = 0
        for op in reversed(graph.ops()):
            if not op.has(Trait.PURE) or op.has(Trait.STATEFUL):
                continue
            if any(v.uses or graph.is_output(v) for v in op.outputs):
                continue
            graph.remove(op)
            removed += 1
        return PassResult(graph, removed > 0, {"removed": removed})
