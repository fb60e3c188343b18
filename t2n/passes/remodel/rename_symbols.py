"""``renamed_symbols``: symbols get the names the application uses (``S`` → ``frames``);
several old names given one new name become one symbol (axes the application knows are
equal). Assertions are rewritten with the new names."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from t2n.errors import RemodelPlanError
from t2n.ir import Graph, Sym
from t2n.passes.base import Pass, PassResult
from t2n.passes.remodel.common import input_names, output_names
from t2n.passes.remodel.symbols import require_symbols, substitute_symbols


def _as_dict(m: Mapping[str, str]) -> dict[str, str]:
    return dict(m)


@attrs.frozen
class RenameSymbols(Pass):
    """``renames`` maps each old symbol name to its new name."""

    renames: Mapping[str, str] = attrs.field(converter=_as_dict)
    key: str = "renamed_symbols"
    name = "renamed-symbols"

    def run(self, graph: Graph) -> PassResult:
        require_symbols(graph, self.renames, self.key)
        tensors = set(input_names(graph)) | set(output_names(graph))
        clash = sorted(set(self.renames.values()) & tensors)
        if clash:
            raise RemodelPlanError(self.key, f"{', '.join(clash)} already names an input or output; "
                                             "a symbol needs a name of its own")
        before = graph.edits
        rewritten = substitute_symbols(graph, {old: Sym(new) for old, new in self.renames.items() if old != new})
        return PassResult(graph, graph.edits != before, {"renamed": len(self.renames), "rewritten": rewritten})
