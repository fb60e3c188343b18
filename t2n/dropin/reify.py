"""Passes that give a ``TractNNEF`` its own forms of two computations, found in the IR
by pattern (whatever module or function wrote them):

- :class:`ReifySdpa` (``reify_sdpa_operator``, tract 0.22+): the scaled dot-product
  attention the frontend writes as ``matmul(softmax(matmul(q · c, kᵀ) [masked]), v)``
  becomes one ``tract_sdpa`` op (``tract_transformers_sdpa``), its bool and additive
  masks merged into one additive mask. A row that masks every key still gives zeros,
  as in PyTorch: the select that makes them is kept, on the output.
- :class:`DeboxUpsample` (``upsample_with_debox``, tract 0.23+): nearest upsampling by
  integer factors along spatial axes (``reshape(tile(unsqueeze(x)))`` per axis) becomes
  one ``tract_debox`` op (``debox``: a transposed convolution with a kernel of ones, whose
  windows do not overlap, so every output is one input times one: exact).

Matches are rewritten only where every intermediate value has no other reader; what
does not match keeps its decomposed form. A nearest upsampling of a convolution or
matrix product (directly or through element-wise ops) keeps its form too: see
``_FUSED_BY_TRACT``.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from t2n.dropin.ops import with_tract_forms
from t2n.ir import DType, Graph, Op, Trait, Value
from t2n.ir.graph import constant_data
from t2n.passes.base import Pass, PassResult
from t2n.passes.matching import first_match, only_reader, producer_of, take_place
from t2n.passes.tile_upsampling import tile_step

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


@attrs.frozen
class ReifySdpa(Pass):
    """Scaled dot-product attention as one ``tract_sdpa`` op."""

    name = "reify-sdpa"

    def run(self, graph: Graph) -> PassResult:
        count = 0
        while (found := first_match(graph, match_attention)) is not None:  # one at a time: a match may read another's output
            graph.opset = with_tract_forms(graph.opset)
            op, att = found
            take_place(graph, op.output, _rewrite_attention(graph, op, att))
            count += 1
            if op in graph:  # still read: never match it again
                break
        return PassResult(graph, count > 0, {"attentions": count} if count else {})


def match_nearest(graph: Graph, reshape: Op) -> tuple[Value, tuple[int, ...]] | None:
    """(x, factors by axis) when ``reshape`` ends the frontend's nearest upsampling by an
    integer factor: reshape(tile(unsqueeze(x, axes=[axis + 1]), reps)), reps all one
    but the factor at axis + 1, along a spatial axis (2 or later) of a float tensor.
    An ``x`` that is itself a ``tract_debox`` read only here is merged into one op."""
    step = tile_step(graph, reshape)
    if step is None or step.x.type.dtype not in _FLOATS:
        return None
    x, axis, factor, unsq = step.x, step.axis, step.factor, step.unsqueeze
    factors = [factor if i == axis else 1 for i in range(x.rank)]
    inner = producer_of(x, "tract_debox")
    if inner is not None and only_reader(graph, x, unsq):
        factors = [a * b for a, b in zip(factors, inner.attrs["factors"])]
        x = inner.inputs[0]
    if _after_a_layer(x):
        return None
    return x, tuple(factors)


def _after_a_layer(x: Value) -> bool:
    """``x`` is a convolution or matrix product, possibly through element-wise ops
    (which tract fuses into the layer, with the debox after them) and the tile form of
    an upsampling of another axis."""
    p = x.producer
    while p is not None and (p.has(Trait.ELEMENTWISE) or p.kind in _NEAREST_STEPS):
        computed = [v for v in p.inputs if v.producer is None or not v.producer.has(Trait.CONSTANT_LIKE)]
        if len(computed) != 1:
            return False
        p = computed[0].producer
    return p is not None and p.kind in _FUSED_BY_TRACT


@attrs.frozen
class DeboxUpsample(Pass):
    """Nearest upsampling by an integer factor as ``tract_debox`` ops."""

    name = "debox-upsample"

    def run(self, graph: Graph) -> PassResult:
        count = 0
        while (found := first_match(graph, match_nearest)) is not None:  # one at a time: axes chain
            graph.opset = with_tract_forms(graph.opset)
            op, (x, factors) = found
            out = graph.create_op("tract_debox", [x], {"factors": factors}, loc=op.loc, names=["debox"]).output
            take_place(graph, op.output, out)
            count += 1
            if op in graph:
                break
        return PassResult(graph, count > 0, {"upsamplings": count} if count else {})


def tract_form_passes(target: Any) -> list[Pass]:
    """The passes a ``TractNNEF``'s options ask for, where its version has the op."""
    out: list[Pass] = []
    if getattr(target, "reify_sdpa_operator", False) and target.at_least("0.22.0"):
        out.append(ReifySdpa())
    if getattr(target, "upsample_with_debox", False) and target.at_least("0.23.0"):
        out.append(DeboxUpsample())
    if getattr(target, "name", None) == "tract" and target.at_least("0.23.9"):
        from t2n.passes.gru_sequence import GruSequence
        from t2n.passes.nearest_upsample import NearestUpsample

        out.append(NearestUpsample())  # tract's own op; why: t2n/passes/nearest_upsample.py
        out.append(GruSequence())  # tract's gru_seq projecting its input; why: t2n/passes/gru_sequence.py
    elif getattr(target, "name", None) == "tract" and target.at_least("0.23.0"):
        from t2n.passes.nearest_deconv import NearestAsDeconv

        out.append(NearestAsDeconv())
    return out
