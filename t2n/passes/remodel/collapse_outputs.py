"""``collapse_dims`` on an output: its size-1 axes are squeezed away at the boundary."""

from __future__ import annotations

import attrs

from t2n.errors import RemodelPlanError
from t2n.ir import Graph
from t2n.passes.base import Pass, PassResult
from t2n.passes.remodel.common import norm_axes, output_index


@attrs.frozen
class CollapseOutputDims(Pass):
    """Removes ``axes`` (each of size 1) from output ``output``."""

    output: str
    axes: tuple[int, ...]
    key: str = "collapse_dims"
    name = "collapse-output-dims"

    def run(self, graph: Graph) -> PassResult:
        i = output_index(graph, self.output, self.key)
        v = graph.outputs[i]
        axes = norm_axes(self.axes, v.rank, self.key)
        for a in axes:
            if v.type.shape[a] != 1:
                raise RemodelPlanError(self.key, f"axis {a} of output {self.output!r} ({v.type}) has size "
                                                 f"{v.type.shape[a]}; only size-1 axes can be collapsed "
                                                 "(a symbolic one: collapse the input axis that carries it)")
        squeezed = graph.create_op("squeeze", [v], {"axes": tuple(axes)}, names=[self.output]).output
        outs = list(graph.outputs)
        outs[i] = squeezed
        graph.set_outputs(outs)
        return PassResult(graph, True, {"collapsed_axes": len(axes)})
