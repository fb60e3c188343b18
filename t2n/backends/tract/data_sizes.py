"""Lengths computed from tensor data (``arange(n)``, ``zeros(n)`` with ``n`` an input)
must stay out of graph.nnef's text: tract names such a length itself at run time, so an
op that writes it as a size (a reshape target, a slice bound) cannot be expressed."""

from __future__ import annotations

import re

from t2n.errors import OpProblem
from t2n.ir import Graph
from t2n.ir.dims import is_data_symbol


def data_size_problems(graph: Graph, graph_nnef: str) -> list[OpProblem]:
    """One problem per data length written in ``graph_nnef``, naming the op that made it
    and the first line that writes it."""
    made: dict[str, tuple[str, str, str]] = {}
    for op in graph.ops():
        for v in op.outputs:
            for sym in v.symbols():
                if is_data_symbol(sym) and sym not in made:
                    made[sym] = (op.loc.aten or op.kind, op.loc.module, op.loc.source)
    problems = []
    body = graph_nnef[graph_nnef.find("\ngraph "):]
    for sym, (aten, module, source) in made.items():
        word = re.compile(rf"\b{re.escape(sym)}\b")
        line = next((ln.strip() for ln in body.splitlines() if word.search(ln)), None)
        if line is not None:
            problems.append(OpProblem(
                aten, module, source,
                f"its length is computed from tensor data, and '{line}' would need it as a "
                "size known when the graph is loaded; tract gives such a length a name only "
                "at run time. Keep that length to element-wise and broadcasting ops, or "
                "compute it from input sizes (dynamic_axes) instead of tensor values",
            ))
    return problems
