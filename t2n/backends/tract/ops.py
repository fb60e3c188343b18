"""IR ops for tract's own forms of three computations, made only by the passes of
:mod:`t2n.backends.tract.passes` for a ``TractNNEF`` that asks for them (or whose
version has them).

``tract_sdpa(q, k, v[, mask]) {scale}``: softmax(q kᵀ · scale + mask) v, one
``tract_transformers_sdpa`` in graph.nnef (``mask`` additive, broadcast like the scores).
``tract_debox(x) {factors}``: every element repeated ``factors[i]`` times along each
axis ``i`` (nearest upsampling by integer factors), one ``debox`` in graph.nnef.
``tract_moe_ffn(x, wg, w1, w2[, w3][, wg_bias][, w1_bias][, w3_bias][, w2_bias])``: a
mixture-of-experts block as tract's ``tract_moe_ffn`` computes it, router included:
router logits ``x wgᵀ (+ wg_bias)``, the ``k`` experts of largest logit, their weights
by ``gate`` (``softmax_topk``: softmax over the ``k`` chosen logits; ``softmax_all``:
softmax over every expert, not renormalized; ``sigmoid``; ``raw``), then the experts as
``moe_experts`` computes them (:mod:`t2n.ir.ops.moe`) with ``w1`` = gate, ``w3`` = up,
``w2`` = down and ``expert_layout`` = its ``layout``; the optional operands are present
as their ``has_*`` attributes say, in that order.
``tract_nearest_upsample(x) {factors}``: every element of the trailing ``len(factors)``
axes repeated ``factors[i]`` times (axes before those untouched), NNEF's
``nearest_upsample``, which tract 0.23.9 runs as its own resize kernel.
``tract_gru_seq(x, w_ih, w_hh, h0[, b]) {hidden, reverse}``: a whole GRU direction over
a batch-major sequence, input projection included, one ``tract_core_gru_seq``: ``x``
[B, T, I], ``w_ih`` [3H, I], ``w_hh`` [3H, H], ``h0`` [B, H], ``b`` [6H] (the input then
the recurrent biases), gate blocks in ``rnn_scan``'s order
(:data:`t2n.ir.ops.rnn.GATE_ORDER`); outputs every step's hidden state [B, T, H] and the
last one [B, H].
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from t2n.ir import InferContext, OpSet, OpTable, TensorType
from t2n.ir.attributes import BOOL, FLOAT, INT, INTS, STR, optional, required
from t2n.ir.infer_utils import InferError, tensor
from t2n.ir.ops.moe import EXPERT_ATTRS, check_experts, expert_outputs, optional_operands
from t2n.ir.ops.rnn import step

TRACT_FORMS = OpTable("tract_forms")


def _sdpa_eval(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> list[np.ndarray]:
    q, k, v = (x.astype(np.float64) for x in xs[:3])
    scale = attrs["scale"]
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if len(xs) > 3:
        scores = scores + xs[3].astype(np.float64)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs = scores / scores.sum(axis=-1, keepdims=True)
    return [np.matmul(probs, v).astype(xs[0].dtype)]


@TRACT_FORMS.op("tract_sdpa", evaluate=_sdpa_eval, attrs={"scale": required(FLOAT)})
def _sdpa(ctx: InferContext) -> list[TensorType]:
    """Output: q's type with v's last axis."""
    q, _, v = ctx.types[:3]
    return [tensor(q.dtype, [*q.shape[:-1], v.shape[-1]])]


def _debox_eval(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> list[np.ndarray]:
    out = xs[0]
    for axis, factor in enumerate(attrs["factors"]):
        out = np.repeat(out, int(factor), axis=axis)
    return [out]


@TRACT_FORMS.op("tract_debox", evaluate=_debox_eval, attrs={"factors": required(INTS)})
def _debox(ctx: InferContext) -> list[TensorType]:
    """Output: x's type with each axis ``factors[axis]`` times longer."""
    (x,) = ctx.types
    factors = [int(f) for f in ctx.attrs["factors"]]
    return [tensor(x.dtype, [d * f if f != 1 else d for d, f in zip(x.shape, factors)])]


MOE_GATES = ("softmax_topk", "softmax_all", "sigmoid", "raw")
"""How ``tract_moe_ffn`` weighs the chosen experts."""

MOE_FLAGS = ("has_w3", "has_wg_bias", "has_w1_bias", "has_w3_bias", "has_w2_bias")
"""Optional operands of ``tract_moe_ffn``, in operand order after ``w2``."""


def route(logits: np.ndarray, k: int, gate: str) -> tuple[np.ndarray, np.ndarray]:
    """(index [T, k], weights [T, k]) as tract's router chooses them from ``logits``."""
    index = np.argsort(-logits, axis=-1, kind="stable")[:, :k]
    chosen = np.take_along_axis(logits, index, axis=-1)
    if gate == "softmax_topk":
        e = np.exp(chosen - chosen.max(axis=-1, keepdims=True))
        weights = e / e.sum(axis=-1, keepdims=True)
    elif gate == "softmax_all":
        e = np.exp(logits - logits.max(axis=-1, keepdims=True))
        weights = np.take_along_axis(e / e.sum(axis=-1, keepdims=True), index, axis=-1)
    elif gate == "sigmoid":
        weights = 1 / (1 + np.exp(-chosen))
    else:
        weights = chosen
    return index, weights


def _moe_ffn_eval(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> list[np.ndarray]:
    x, wg, w1, w2 = xs[:4]
    extra = optional_operands(xs, 4, MOE_FLAGS, attrs)
    flat = x.reshape(-1, x.shape[-1]).astype(np.float64)
    logits = flat @ wg.reshape(-1, wg.shape[-1]).astype(np.float64).T
    if "has_wg_bias" in extra:
        logits = logits + extra["has_wg_bias"]
    index, weights = route(logits, int(attrs["k"]), str(attrs["gate"]))
    biases = {new: extra[old] for old, new in (("has_w1_bias", "has_gate_bias"), ("has_w3_bias", "has_up_bias"),
                                               ("has_w2_bias", "has_down_bias")) if old in extra}
    experts_attrs = {"layout": attrs["expert_layout"], "activation": attrs["activation"],
                     "act_alpha": attrs.get("act_alpha"), "act_limit": attrs.get("act_limit")}
    y = expert_outputs(flat, w1, w2, extra.get("has_w3"), biases, experts_attrs)
    out = np.zeros_like(flat)
    for t in range(flat.shape[0]):
        for e, w in zip(index[t], weights[t]):
            out[t] += w * y[int(e), t]
    return [out.reshape(x.shape).astype(x.dtype)]


@TRACT_FORMS.op("tract_moe_ffn", evaluate=_moe_ffn_eval, attrs={
    "k": required(INT), "gate": required(STR), "expert_layout": EXPERT_ATTRS["layout"],
    **{name: a for name, a in EXPERT_ATTRS.items() if name != "layout"},
    **{flag: optional(BOOL, False) for flag in MOE_FLAGS}})
def _moe_ffn(ctx: InferContext) -> list[TensorType]:
    """Output: x's type. wg [E, D]."""
    x, wg, w1, w2 = ctx.types[:4]
    check_experts(x, w1, w2, str(ctx.attrs["expert_layout"]), "tract_moe_ffn")
    if str(ctx.attrs["gate"]) not in MOE_GATES:
        raise InferError(f"tract_moe_ffn: gate must be one of {MOE_GATES}, got {ctx.attrs['gate']!r}")
    if wg.rank != 2 or wg.shape[0] != w1.shape[0]:
        raise InferError(f"tract_moe_ffn: wg must be [E, D] with E = {w1.shape[0]} experts, got {wg.shape}")
    k = ctx.attrs["k"]
    if not isinstance(k, int) or not 0 < k <= int(w1.shape[0]):
        raise InferError(f"tract_moe_ffn: k must be between 1 and the number of experts, got {k!r}")
    expected = 4 + sum(bool(ctx.attrs.get(f, False)) for f in MOE_FLAGS)
    if len(ctx.types) != expected:
        raise InferError(f"tract_moe_ffn: {expected} operands expected from its has_* attributes, "
                         f"got {len(ctx.types)}")
    return [x]


def _nearest_eval(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> list[np.ndarray]:
    out = xs[0]
    first = out.ndim - len(attrs["factors"])
    for i, factor in enumerate(attrs["factors"]):
        out = np.repeat(out, int(factor), axis=first + i)
    return [out]


@TRACT_FORMS.op("tract_nearest_upsample", evaluate=_nearest_eval, attrs={"factors": required(INTS)})
def _nearest_upsample(ctx: InferContext) -> list[TensorType]:
    """x's type with each of its trailing axes ``factors[i]`` times longer."""
    (x,) = ctx.types
    factors = [int(f) for f in ctx.attrs["factors"]]
    if not factors or len(factors) > x.rank or any(f < 1 for f in factors):
        raise InferError(f"tract_nearest_upsample: factors {factors} for a rank-{x.rank} tensor")
    first = x.rank - len(factors)
    return [tensor(x.dtype, [d if i < first or factors[i - first] == 1 else d * factors[i - first]
                             for i, d in enumerate(x.shape)])]


def _gru_eval(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> list[np.ndarray]:
    x, w_ih, w_hh, h = xs[:4]
    hidden = int(attrs["hidden"])
    b = xs[4] if len(xs) > 4 else np.zeros(6 * hidden, dtype=x.dtype)
    xw = x @ w_ih.T + b[:3 * hidden]
    steps = range(x.shape[1] - 1, -1, -1) if attrs.get("reverse") else range(x.shape[1])
    ys = [np.empty(0)] * x.shape[1]
    for t in steps:
        h, _ = step("gru", xw[:, t], h, None, w_hh, b[3 * hidden:], None, hidden)
        ys[t] = h
    return [np.stack(ys, axis=1).astype(x.dtype), h.astype(x.dtype)]


@TRACT_FORMS.op("tract_gru_seq", evaluate=_gru_eval,
                attrs={"hidden": required(INT), "reverse": optional(BOOL, False)})
def _gru_seq(ctx: InferContext) -> list[TensorType]:
    """Every step's hidden state [B, T, H] and the last one [B, H]."""
    x, w_ih, w_hh, h0 = ctx.types[:4]
    hidden = int(ctx.attrs["hidden"])
    if x.rank != 3 or w_ih.rank != 2 or w_hh.rank != 2 or h0.rank != 2:
        raise InferError("tract_gru_seq: x is [B, T, I], the weights 2-D, h0 [B, H]")
    return [tensor(x.dtype, [x.shape[0], x.shape[1], hidden]), tensor(x.dtype, [x.shape[0], hidden])]


def with_tract_forms(opset: OpSet) -> OpSet:
    """``opset`` with the ops above (unchanged if it has them)."""
    return opset if "tract_sdpa" in opset else opset.extended(TRACT_FORMS)
