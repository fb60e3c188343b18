"""``collapse_dims`` on an input: size-1 axes leave the interface (``[1, T, F]`` becomes
``[T, F]``); inside, an ``unsqueeze`` gives the graph the shape it was built for. An
axis whose size is a symbol (a dynamic batch) is that symbol fixed to 1 everywhere first."""

from __future__ import annotations

import attrs

from t2n.errors import RemodelPlanError
from t2n.ir import Graph, Sym
from t2n.passes.base import Pass, PassResult
from t2n.passes.remodel.common import find_input, norm_axes
from t2n.passes.remodel.symbols import substitute_symbols


@attrs.frozen
class CollapseInputDims(Pass):
    """Removes ``axes`` (each of size 1, or a plain symbol then fixed to 1) from input ``input``."""

    input: str
    axes: tuple[int, ...]
    key: str = "collapse_dims"
    name = "collapse-input-dims"

    def run(self, graph: Graph) -> PassResult:
        v = find_input(graph, self.input, self.key)
        axes = norm_axes(self.axes, v.rank, self.key)
        pinned: dict[str, int] = {}
        for a in axes:
            d = v.type.shape[a]
            if isinstance(d, Sym):
                if len(d.symbols()) != 1 or str(d) not in d.symbols():
                    raise RemodelPlanError(self.key, f"axis {a} of {self.input!r} is {d}, not a plain "
                                                     "symbol that could be fixed to 1")
                pinned[str(d)] = 1
            elif d != 1:
                raise RemodelPlanError(self.key, f"axis {a} of {self.input!r} has size {d}; only size-1 "
                                                 "axes (or a symbol, fixed to 1) can be collapsed")
        rewritten = substitute_symbols(graph, pinned)
        v = find_input(graph, self.input, self.key)
        readers = list(v.uses)
        graph.set_input_type(v, v.type.with_shape([d for i, d in enumerate(v.type.shape) if i not in axes]))
        full = graph.create_op("unsqueeze", [v], {"axes": tuple(axes)}, names=[f"{self.input}_uncollapsed"]).output
        for op, index in readers:
            graph.set_op_input(op, index, full)
        graph.set_outputs([full if o is v else o for o in graph.outputs])
        return PassResult(graph, True, {"collapsed_axes": len(axes), "symbols_fixed": len(pinned),
                                        "rewritten": rewritten})
