"""``force-attention-inner-in-f32``: the inside of every attention computed in f32.

An attention is found by its shape in the IR, whichever way the model wrote it
(``scaled_dot_product_attention``, ``nn.MultiheadAttention``, transformers' eager
attention): a ``softmax`` whose input comes from a ``matmul`` through scaling, masking,
soft-capping, casts and reshapes, and whose output reaches a second ``matmul`` through
casts, masking selects, dropout/head-mask products and reshapes. The region is both
matmuls and everything between them: QKᵀ, scale (also a scaling of Q or K read by QKᵀ
alone), mask, softmax and ·V. Q, K, V and the
mask are cast up at the region's entry and the attention's output is cast back once.
"""

from __future__ import annotations

import attrs

from t2n.ir import Graph, Op, Value
from t2n.passes.precision.base import ForceF32Pass
from t2n.passes.precision.regions import LAYOUT_OPS, Region, input_dependent, ordered, sole_user

_SCORES = frozenset({"cast", "add", "sub", "mul", "div", "select", "neg", "tanh"}) | LAYOUT_OPS
"""Ops between QKᵀ and the softmax: scale, mask, soft-capping, casts, reshapes."""
_PROBABILITIES = frozenset({"cast", "select", "mul"}) | LAYOUT_OPS
"""Ops between the softmax and ·V: casts, masked rows, dropout or head masks, reshapes."""
_DEPTH = 8


def _back_to_matmul(v: Value, dynamic: set[Value], depth: int) -> list[Op] | None:
    """The ops from a ``matmul`` to ``v`` along the scores' path, matmul first."""
    p = v.producer
    if p is None or depth == 0:
        return None
    if p.kind == "matmul":
        return [p]
    if p.kind not in _SCORES:
        return None
    for x in p.inputs:
        if x in dynamic and x.type.dtype.is_float:
            path = _back_to_matmul(x, dynamic, depth - 1)
            if path is not None:
                return [*path, p]
    return None


def _on_to_matmul(graph: Graph, v: Value, depth: int) -> list[Op] | None:
    """The ops from a reader of ``v`` to the ``matmul`` that weights the values by it."""
    for u in graph.users(v):
        if u.kind == "matmul":
            return [u]
        if u.kind in _PROBABILITIES and depth > 0:
            path = _on_to_matmul(graph, u.output, depth - 1)
            if path is not None:
                return [u, *path]
    return None


def _prescaled(graph: Graph, matmul: Op, dynamic: set[Value]) -> list[Op]:
    """Scalings of Q or K by a model constant read by the QKᵀ matmul alone (SDPA scales Q
    before the product)."""
    out: list[Op] = []
    for x in matmul.inputs:
        p = x.producer
        if p is None or p.kind not in ("mul", "div") or sole_user(graph, x) is not matmul:
            continue
        moving = [v for v in p.inputs if v in dynamic]
        if len(moving) == 1 and (p.kind == "mul" or p.inputs[0] is moving[0]):
            out.append(p)
    return out


@attrs.frozen
class ForceAttentionInnerInF32(ForceF32Pass):
    """Compute QKᵀ, scale, mask, softmax and ·V of every attention in f32."""

    name = "force-attention-inner-in-f32"

    def find(self, graph: Graph) -> list[Region]:
        dynamic = input_dependent(graph)
        claimed: set[Op] = set()
        regions: list[Region] = []
        for op in graph.ops():
            if op.kind != "softmax" or op in claimed:
                continue
            scores = _back_to_matmul(op.inputs[0], dynamic, _DEPTH)
            weighted = _on_to_matmul(graph, op.output, _DEPTH)
            if scores is None or weighted is None:
                continue
            ops = [*_prescaled(graph, scores[0], dynamic), *scores, op, *weighted]
            if len(set(ops)) != len(ops) or claimed.intersection(ops):
                continue
            claimed.update(ops)
            regions.append(Region(ordered(graph, ops), "attention"))
        return regions


__all__ = ["ForceAttentionInnerInF32"]
