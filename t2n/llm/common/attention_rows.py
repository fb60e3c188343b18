"""An LLM's attention never has a query row without a key: drop the guard that zeroes
such rows.

The attention lowering keeps PyTorch's rule that a query whose mask keeps no key gives
zeros (``select(any_reduce(keep), probs, 0)``), because a mask computed at run time
might empty a row. The masks of an exported language model are computed from positions
alone (the traced wrapper takes token ids and the cache, no padding mask): causal,
sliding-window or chunked, each keeps the query's own position, so no row is ever
empty and the guard is a no-op. Removing it saves an ``any_reduce`` over the mask and
a ``select`` over every layer's probabilities: ~1 % of tract's profile of a 64-token
prefill of the 4-layer, 512-wide Llama of ``benchmarks/llm_latency.py`` (0.49 of 48 ms,
tract 0.23.9), less of a decode step.

A guard whose mask reads a graph input (a padding mask, token types) is kept.
"""

from __future__ import annotations

import attrs
import numpy as np

from t2n.ir import Graph, Op, Value
from t2n.ir.graph import constant_data
from t2n.passes.rewrite import Pattern, PatternPass, Patterns


def _positional(graph: Graph, mask: Value) -> bool:
    """``mask`` is computed from constants and symbolic sizes only (no graph input)."""
    inputs = set(graph.inputs)
    seen: set[int] = set()
    todo = [mask]
    while todo:
        v = todo.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if v in inputs:
            return False
        if v.producer is not None:
            todo.extend(v.producer.inputs)
    return True


def _row_guard(graph: Graph, op: Op) -> Value | None:
    """What ``op`` passes through when it is ``select(any_reduce(mask), x, 0)`` over a
    positional mask, else None."""
    if op.kind != "select" or len(op.inputs) != 3:
        return None
    cond = op.inputs[0].producer
    zero = constant_data(op.inputs[2])
    if cond is None or cond.kind != "any_reduce" or zero is None or np.any(np.asarray(zero) != 0):
        return None
    if op.inputs[1].type != op.output.type or not _positional(graph, cond.inputs[0]):
        return None
    return op.inputs[1]


_EMPTY_ROW_GUARD = Pattern("dropped", _row_guard, lambda graph, op, kept: kept)
"""A guard of positional rows → the value it passes through."""


@attrs.frozen
class DropEmptyRowGuards(PatternPass):
    """Read the attention output directly where a positional mask guarded its rows."""

    name = "llm-drop-empty-row-guards"

    def patterns(self) -> Patterns:
        return [_EMPTY_ROW_GUARD]
