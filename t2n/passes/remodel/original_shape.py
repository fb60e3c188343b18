"""``original_shape``: the plan says what an input looks like before it is remodelled;
the graph must agree (a plan written for another export fails here, by name)."""

from __future__ import annotations

import attrs

from t2n.errors import RemodelPlanError
from t2n.ir import Graph, Sym
from t2n.passes.base import Pass, PassResult
from t2n.passes.remodel.common import find_input


@attrs.frozen
class CheckOriginalShape(Pass):
    """Checks input ``input`` has ``shape`` (ints, and symbol names matching the graph's
    symbols exactly); changes nothing."""

    input: str
    shape: tuple[int | str, ...]
    key: str = "original_shape"
    name = "remodel-original-shape"

    def run(self, graph: Graph) -> PassResult:
        v = find_input(graph, self.input, self.key)
        have = list(v.type.shape)
        want = list(self.shape)
        if len(have) != len(want) or any(
                (str(h) != w) if isinstance(w, str) else (isinstance(h, Sym) or h != w) for h, w in zip(have, want)):
            raise RemodelPlanError(self.key, f"input {self.input!r} is {[str(d) for d in have]} in the graph, "
                                             f"not {want}")
        return PassResult(graph, False, {"checked": 1})
