"""Which values are computed from the output of a recurrent loop.

tract's optimizer never finishes loading a linear layer that flattens such a value to
2-D when loops run over both axes of a map (bidirectional LSTMs over the rows and the
columns of a feature map, joined by a concat: sequencer models). ``nn.py`` writes
those linear layers as unit-batch rank-3 matmuls, and ``block_quant.py`` keeps
their weights in float (tract reads a Q4_0 weight in a 2-D matmul only).
"""

from __future__ import annotations

import weakref

from t2n.ir import Graph, Value

RECURRENT = frozenset({"rnn_scan"})
"""IR ops written as a ``tract_core_scan`` loop."""

_found: weakref.WeakKeyDictionary[Graph, tuple[int, frozenset[Value]]] = weakref.WeakKeyDictionary()


def after_recurrence(graph: Graph, v: Value) -> bool:
    """Whether ``v`` is computed from a recurrent loop's output (found once per graph
    state: the set is recomputed when the graph has been edited)."""
    cached = _found.get(graph)
    if cached is None or cached[0] != graph.edits:
        seen: set[Value] = set()
        todo = [o for op in graph if op.kind in RECURRENT for o in op.outputs]
        while todo:
            cur = todo.pop()
            if cur in seen:
                continue
            seen.add(cur)
            todo.extend(o for user, _ in cur.uses for o in user.outputs)
        cached = (graph.edits, frozenset(seen))
        _found[graph] = cached
    return v in cached[1]
