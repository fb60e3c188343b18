"""``outputs_keep``: only the listed outputs stay, in the listed order; the ops only the
others needed go with them (inputs stay: they are the application's interface)."""

from __future__ import annotations

import attrs

from t2n.ir import Graph
from t2n.passes.base import Pass, PassResult
from t2n.passes.dead_node_elimination import DeadNodeElimination
from t2n.passes.remodel.common import output_index, output_names


@attrs.frozen
class KeepOutputs(Pass):
    outputs: tuple[str, ...]
    key: str = "outputs_keep"
    name = "outputs-keep"

    def run(self, graph: Graph) -> PassResult:
        before = graph.edits
        names = output_names(graph)
        idx = [output_index(graph, n, self.key) for n in self.outputs]
        values = [graph.outputs[i] for i in idx]
        graph.set_outputs(values)
        graph.info.output_names = tuple(self.outputs)
        graph.info.same_io_names = tuple(n for n in graph.info.same_io_names if n in self.outputs)
        removed = DeadNodeElimination().run(graph).stats["removed"]
        return PassResult(graph, graph.edits != before,
                          {"outputs_dropped": len(names) - len(self.outputs), "ops_removed": removed})
