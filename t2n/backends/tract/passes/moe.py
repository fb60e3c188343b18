"""A mixture-of-experts block as tract's one operation: the router found by pattern in
front of the routed experts (``moe_experts``, see :mod:`t2n.ir.ops.moe`).

:class:`FuseMoeRouter` looks at where each ``moe_experts`` op takes its expert indices
and weights from. When both come from one ``topk`` over the last axis of router scores
computed from the experts' own input as ``x wgᵀ (+ bias)``, and the weights are one of
the forms tract's ``tract_moe_ffn`` computes, the op becomes ``tract_moe_ffn``
(:mod:`t2n.backends.tract.ops`; the router ops are then left unread and dropped):

====================================================  ===============  =================
weights                                               scores           ``gate``
====================================================  ===============  =================
``v / Σ v`` (``v`` the top-k values)                  ``softmax(l)``   ``softmax_topk``
``softmax(v)``                                        ``l``            ``softmax_topk``
``v``                                                 ``softmax(l)``   ``softmax_all``
``v``                                                 ``sigmoid(l)``   ``sigmoid``
``v``                                                 ``l``            ``raw``
====================================================  ===============  =================

(casts between float types are looked through: tract routes in f32.) Any other router
(a grouped or biased choice, a scaled or shifted weight...) keeps its operations and the
experts their standard form (:class:`~t2n.passes.expand_moe.ExpandMoeExperts`); so do
experts whose activation tract's operator lacks (exact, erf-based GELU).
"""

from __future__ import annotations

from typing import Any

import attrs

from t2n.backends.tract.ops import with_tract_forms
from t2n.ir import Graph, Op, Value
from t2n.ir.ops.moe import EXPERT_FLAGS, optional_operands
from t2n.ir.ops.sort import WHOLE_AXIS
from t2n.passes.rewrite import Pattern, PatternPass

_TRACT_ACTIVATION = {"silu": "silu", "gelu_tanh": "gelu", "relu": "relu"}
"""moe_experts activation → tract_moe_ffn's (``gelu`` is its tanh approximation)."""

_SEE_THROUGH = ("reshape", "cast", "squeeze", "unsqueeze", "identity")


def _under_casts(v: Value) -> Value:
    while v.producer is not None and v.producer.kind == "cast" and v.producer.inputs[0].type.dtype.is_float \
            and v.type.dtype.is_float:
        v = v.producer.inputs[0]
    return v


def _root(v: Value) -> Value:
    """``v`` under reshapes and casts: the tensor it is a view of."""
    while v.producer is not None and v.producer.kind in _SEE_THROUGH:
        v = v.producer.inputs[0]
    return v


def _produced(v: Value, kind: str) -> Op | None:
    p = _under_casts(v).producer
    return p if p is not None and p.kind == kind else None


def _last_axis(op: Op, key: str, rank: int) -> bool:
    axes = op.attrs.get(key)
    axes = [axes] if isinstance(axes, int) else list(axes or [])
    return [a % rank for a in axes] == [rank - 1]


@attrs.frozen
class _Router:
    wg: Value
    bias: Value | None
    k: int
    gate: str


def _logits(scores: Value, x: Value) -> tuple[Value, Value | None] | None:
    """(wg, bias) when ``scores`` is ``x wgᵀ (+ bias)`` over the same tokens as ``x``."""
    v = _under_casts(scores)
    bias = None
    p = v.producer
    if p is not None and p.kind == "add":
        for m, c in (p.inputs, p.inputs[::-1]):
            if _produced(m, "matmul") is not None and c.rank == 1:
                v, bias = _under_casts(m), c
                break
        else:
            return None
    mm = v.producer
    if mm is None or mm.kind != "matmul" or not mm.attrs.get("transpose_b") or mm.attrs.get("transpose_a"):
        return None
    xr, wg = mm.inputs
    if wg.rank != 2 or _root(xr) is not _root(x) or xr.type.shape[-1] != x.type.shape[-1]:
        return None
    return wg, bias


def match_router(op: Op) -> _Router | None:
    """The router in front of ``moe_experts`` ``op``, if tract's operator computes it."""
    x, index, weights = op.inputs[:3]
    top = _produced(index, "topk")
    if (top is None or top.outputs[1] is not _under_casts(index) or not top.attrs.get("largest", True)
            or int(top.attrs["k"]) == WHOLE_AXIS):  # a sort is not a router's choice
        return None
    scores = top.inputs[0]
    if int(top.attrs["axis"]) != scores.rank - 1:
        return None
    values = top.outputs[0]
    w = _under_casts(weights)
    scored = _under_casts(scores).producer
    kind = scored.kind if scored is not None and scored.kind in ("softmax", "sigmoid") else "logits"
    if kind == "softmax" and scored is not None and not _last_axis(scored, "axes", scores.rank):
        return None
    gate: str | None = None
    p = w.producer
    if w is values:
        gate = {"softmax": "softmax_all", "sigmoid": "sigmoid", "logits": "raw"}[kind]
    elif p is not None and p.kind == "div" and kind == "softmax" and _under_casts(p.inputs[0]) is values:
        total = _produced(p.inputs[1], "sum_reduce")
        if total is not None and _under_casts(total.inputs[0]) is values and total.attrs.get("keepdims") \
                and _last_axis(total, "axes", values.rank):
            gate = "softmax_topk"
    elif p is not None and p.kind == "softmax" and kind == "logits" and _under_casts(p.inputs[0]) is values \
            and _last_axis(p, "axes", values.rank):
        gate = "softmax_topk"
    if gate is None:
        return None
    logits_of = scored.inputs[0] if scored is not None and kind != "logits" else scores
    found = _logits(logits_of, x)
    if found is None:
        return None
    return _Router(found[0], found[1], int(top.attrs["k"]), gate)


def _ffn_attrs(op: Op, router: _Router) -> dict[str, Any] | None:
    a = op.attrs
    if a.get("act_limit") is not None:
        activation = "silu"
    else:
        found = _TRACT_ACTIVATION.get(str(a["activation"]))
        if found is None:
            return None
        activation = found
    out: dict[str, Any] = {"k": router.k, "activation": activation, "gate": router.gate,
                           "expert_layout": a["layout"], "act_alpha": a.get("act_alpha"),
                           "act_limit": a.get("act_limit")}
    return out


def _match(graph: Graph, op: Op) -> tuple[_Router, dict[str, Any]] | None:
    """The router and ``tract_moe_ffn``'s attributes for ``moe_experts`` ``op`` (None: no match)."""
    if op.kind != "moe_experts":
        return None
    router = match_router(op)
    found = None if router is None else _ffn_attrs(op, router)
    return None if router is None or found is None else (router, found)


def fuse(graph: Graph, op: Op, found: tuple[_Router, dict[str, Any]]) -> Value:
    """``tract_moe_ffn`` in place of ``moe_experts`` ``op`` and its router."""
    router, ffn_attrs = found
    x, _, _, w_gate, w_down = op.inputs[:5]
    extra = optional_operands(op.inputs, 5, EXPERT_FLAGS, op.attrs)
    inputs = [x, router.wg, w_gate, w_down]
    ffn_attrs = dict(ffn_attrs)
    for flag, value in (("has_w3", extra.get("has_up")), ("has_wg_bias", router.bias),
                        ("has_w1_bias", extra.get("has_gate_bias")), ("has_w3_bias", extra.get("has_up_bias")),
                        ("has_w2_bias", extra.get("has_down_bias"))):
        ffn_attrs[flag] = value is not None
        if value is not None:
            inputs.append(value)
    graph.opset = with_tract_forms(graph.opset)
    return graph.create_op("tract_moe_ffn", inputs, ffn_attrs, loc=op.loc).output


@attrs.frozen
class FuseMoeRouter(PatternPass):
    """``moe_experts`` and the router in front of it → ``tract_moe_ffn`` (tract 0.23.9+)."""

    name = "fuse-moe-router"

    def patterns(self) -> list[Pattern[Any]]:
        return [Pattern("moe blocks fused", _match, fuse)]


__all__ = ["FuseMoeRouter", "match_router"]
