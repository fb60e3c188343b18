"""Evaluate values of a TorchScript graph on the example inputs.

The graph is extended for a moment so that it also returns the values asked for,
compiled into a function, run once, and restored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from t2n.frontend import torch_private


def probe(
    graph: torch._C.Graph, self_obj: Any, args: Sequence[Any], values: Sequence[torch._C.Value]
) -> list[Any]:
    """The runtime values of top-level ``values`` when the graph runs on ``args``."""
    if not values:
        return []
    outs = list(graph.outputs())
    items = [*outs, *values]
    tup = graph.create("prim::TupleConstruct", items, 1)
    tup.insertBefore(graph.return_node())
    tup.output().setType(torch._C.TupleType([v.type() for v in items]))
    for i in reversed(range(len(outs))):
        graph.eraseOutput(i)
    graph.registerOutput(tup.output())
    try:
        fn = torch_private.function_from_graph("t2n_probe", graph)
        args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]  # in-place writes stay here
        inputs = [self_obj, *args] if self_obj is not None else list(args)
        with torch.no_grad():
            result = fn(*inputs)
    finally:
        graph.eraseOutput(0)
        for o in outs:
            graph.registerOutput(o)
        tup.destroy()
    return list(result[len(outs):])
