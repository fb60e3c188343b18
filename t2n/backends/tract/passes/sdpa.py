"""Scaled dot-product attention as tract's own op, for a ``TractNNEF`` that asks for it
(``reify_sdpa_operator``, tract 0.22+), found in the IR by pattern (whatever module or
function wrote it).

The attention the frontend writes as ``matmul(softmax(matmul(q · c, kᵀ) [masked]), v)``
becomes one ``tract_sdpa`` op (``tract_transformers_sdpa``), its bool and additive masks
merged into one additive mask. A row that masks every key still gives zeros, as in
PyTorch: the select that makes them is kept, on the output. Matches are rewritten only
where every intermediate value has no other reader; what does not match keeps its
decomposed form.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from t2n.backends.tract.ops import with_tract_forms
from t2n.ir import DType, Graph, Op, Value
from t2n.ir.graph import constant_data
from t2n.passes.rewrite import Pattern, PatternPass, only_reader, producer_of

_FLOATS = (DType.F16, DType.F32)

_NEAREST_STEPS = frozenset({"unsqueeze", "tile", "reshape"})

_FUSED_BY_TRACT = frozenset({"conv", "deconv", "matmul"})
"""Layers a ``debox`` may not follow (directly or through element-wise ops): tract
0.23.9 fails to prepare such a model (its optimiser fuses debox's all-one kernel into
the layer's matrix product with the wrong shape); the tile form is kept there."""


def _scalar(v: Value) -> float | None:
    data = constant_data(v)
    if data is None or data.size != 1:
        return None
    return float(np.asarray(data).reshape(()))


@attrs.frozen
class _Attention:
    """One matched attention: its operands, masks and the row-zeroing selects."""

    q: Value
    k: Value
    v: Value
    scale: float
    keep: Value | None
    bias: Value | None
    zeroing: tuple[Op, ...]


def _strip_zeroing(graph: Graph, probs: Value, reader: Op) -> tuple[Value, list[Op]] | None:
    """The softmax under the selects that zero dead rows: select(alive, p, 0) or
    select(dead, 0, p)."""
    zeroing: list[Op] = []
    while (sel := producer_of(probs, "select")) is not None:
        if not only_reader(graph, probs, reader):
            return None
        cond, a, b = sel.inputs
        if cond.rank == 0 or cond.type.shape[-1] != 1:  # must apply to the output rows as well
            return None
        if _scalar(b) == 0.0 and a.producer is not None:
            probs = a
        elif _scalar(a) == 0.0 and b.producer is not None:
            probs = b
        else:
            return None
        zeroing.append(sel)
        reader = sel
    if producer_of(probs, "softmax") is None or not only_reader(graph, probs, reader):
        return None
    return probs, zeroing


def _match_scores(graph: Graph, scores: Value, reader: Op) -> tuple[Value, Value | None, Value | None] | None:
    """(q k matmul, keep, bias) under ``select(keep, s, lowest)`` and ``add(s, bias)``."""
    keep = bias = None
    for _ in range(2):
        if not only_reader(graph, scores, reader):
            return None
        p = scores.producer
        if p is not None and p.kind == "add" and bias is None and keep is None:
            a, b = p.inputs
            scores, bias = (a, b) if producer_of(a, "matmul") or producer_of(a, "select") else (b, a)
            reader = p
        elif p is not None and p.kind == "select" and keep is None:
            cond, a, low = p.inputs
            lowest = _scalar(low)
            if cond.type.dtype is not DType.BOOL or lowest is None or lowest > -1e30:
                return None
            scores, keep, reader = a, cond, p
        else:
            break
    if not only_reader(graph, scores, reader):
        return None
    return scores, keep, bias


def match_attention(graph: Graph, out_op: Op) -> _Attention | None:
    """The attention that ``out_op`` (``matmul(probs, v)``) ends, if it is one."""
    if out_op.kind != "matmul" or out_op.attrs.get("transpose_a") or out_op.attrs.get("transpose_b"):
        return None
    probs, v = out_op.inputs
    stripped = _strip_zeroing(graph, probs, out_op)
    if stripped is None:
        return None
    probs, zeroing = stripped
    soft = probs.producer
    assert soft is not None
    if list(soft.attrs["axes"]) != [probs.rank - 1]:
        return None
    found = _match_scores(graph, soft.inputs[0], soft)
    if found is None:
        return None
    scores, keep, bias = found
    qk = producer_of(scores, "matmul")
    if qk is None or qk.attrs.get("transpose_a") or not qk.attrs.get("transpose_b"):
        return None
    scaled, k = qk.inputs
    mul = producer_of(scaled, "mul")
    if mul is None or not only_reader(graph, scaled, qk):
        return None
    q, factor = mul.inputs
    scale = _scalar(factor)
    if scale is None or q.rank not in (3, 4) or q.type.dtype not in _FLOATS:
        return None
    if not (q.rank == k.rank == v.rank and q.type.shape[:-2] == k.type.shape[:-2] == v.type.shape[:-2]):
        return None
    if bias is not None and (bias.type.dtype is not q.type.dtype or bias.rank > q.rank):
        return None
    if keep is not None and keep.rank > q.rank:
        return None
    return _Attention(q, k, v, scale, keep, bias, tuple(zeroing))


def _additive_mask(graph: Graph, att: _Attention, loc: Any) -> Value | None:
    dt = att.q.type.dtype
    mask = att.bias
    if att.keep is not None:
        zero = graph.create_op("const", [], {"data": _scalar_data(0.0, dt)}, loc=loc).output
        low = graph.create_op("const", [], {"data": _scalar_data(float(np.finfo(dt.numpy).min), dt)},
                              loc=loc).output
        kept = graph.create_op("select", [att.keep, zero, low], loc=loc, names=["sdpa_mask"]).output
        mask = kept if mask is None else graph.create_op("add", [kept, mask], loc=loc).output
    return mask


def _scalar_data(value: float, dtype: DType) -> Any:
    from t2n.ir import ArrayData

    return ArrayData(np.asarray(value, dtype=dtype.numpy), dtype)


def _rewrite_attention(graph: Graph, out_op: Op, att: _Attention) -> Value:
    loc = out_op.loc
    mask = _additive_mask(graph, att, loc)
    inputs = [att.q, att.k, att.v] + ([mask] if mask is not None else [])
    out = graph.create_op("tract_sdpa", inputs, {"scale": att.scale}, loc=loc, names=["sdpa"]).output
    for sel in reversed(att.zeroing):  # innermost first: the order they had on the weights
        cond, a, _ = sel.inputs
        zero = a if _scalar(a) == 0.0 else sel.inputs[2]
        args = [cond, zero, out] if zero is a else [cond, out, zero]
        out = graph.create_op("select", args, loc=sel.loc).output
    return out


def _reified(graph: Graph, op: Op, att: _Attention) -> Value:
    graph.opset = with_tract_forms(graph.opset)
    return _rewrite_attention(graph, op, att)


@attrs.frozen
class ReifySdpa(PatternPass):
    """Scaled dot-product attention as one ``tract_sdpa`` op."""

    name = "reify-sdpa"

    def patterns(self) -> list[Pattern[Any]]:
        return [Pattern("attentions", match_attention, _reified)]
