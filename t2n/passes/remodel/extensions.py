"""``extensions``: extension lines added to the artifact (``tract_assert frames <= 4096``),
after the ones it has; an assertion must name symbols the graph has. Extension lines are
facts about the graph, not ops: the graph itself is unchanged (``modified`` is False)."""

from __future__ import annotations

import attrs

from t2n.errors import RemodelPlanError
from t2n.ir import Graph
from t2n.passes.base import Pass, PassResult
from t2n.passes.remodel.symbols import assertion_symbols, graph_symbols


@attrs.frozen
class AddExtensions(Pass):
    """``lines`` are checked extension lines, without ``extension`` and ``;``."""

    lines: tuple[str, ...]
    key: str = "extensions"
    name = "extensions"

    def run(self, graph: Graph) -> PassResult:
        present = graph_symbols(graph)
        added = 0
        for i, line in enumerate(self.lines):
            unknown = sorted(assertion_symbols(line) - present)
            if unknown:
                raise RemodelPlanError(f"{self.key}[{i}]", f"{line!r} names {', '.join(unknown)}, which the "
                                       f"graph does not have (its symbols: {', '.join(sorted(present)) or 'none'})")
            if line not in graph.info.custom_extensions:
                graph.info.custom_extensions.append(line)
                added += 1
        return PassResult(graph, False, {"added": added})
