"""``eval_symbols``: symbols fixed to sizes (``T: 1`` for one decoding step), as tract's
``SetSymbols`` would, but in the artifact: every shape, size and assertion that named the
symbol now has the number, and assertions left with no symbol are dropped."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from t2n.ir import Graph
from t2n.passes.base import Pass, PassResult
from t2n.passes.remodel.symbols import require_symbols, substitute_symbols


def _as_dict(m: Mapping[str, int]) -> dict[str, int]:
    return dict(m)


@attrs.frozen
class EvalSymbols(Pass):
    sizes: Mapping[str, int] = attrs.field(converter=_as_dict)
    key: str = "eval_symbols"
    name = "eval-symbols"

    def run(self, graph: Graph) -> PassResult:
        require_symbols(graph, self.sizes, self.key)
        before = graph.edits
        rewritten = substitute_symbols(graph, self.sizes)
        return PassResult(graph, graph.edits != before, {"symbols_fixed": len(self.sizes), "rewritten": rewritten})
