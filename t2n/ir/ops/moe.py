"""Mixture-of-experts feed-forward ops.

``moe_experts(x, index, weights, w_gate, w_down[, w_up][, b_gate][, b_up][, b_down])``:
the routed experts of a sparse MoE block, as ``transformers``' experts modules compute
them once the router has chosen. ``x`` ``[T, D]``; ``index`` ``[T, k]`` (integers, the
experts chosen for each token) and ``weights`` ``[T, k]`` (their weights). Each chosen
expert ``e`` computes ``down_e(act(gate_e(x)) * up_e(x))`` (``up`` absent: ``act(gate_e(x))``),
and the results are summed, weighted. The expert tensors are stacked on axis 0
(``E`` experts, ``I`` hidden units per expert):

- ``layout="linear"``: ``w_gate``/``w_up`` ``[E, I, D]``, ``w_down`` ``[E, D, I]``
  (``nn.Linear``'s ``[out, in]`` per expert);
- ``layout="canonical"``: ``w_gate``/``w_up`` ``[E, D, I]``, ``w_down`` ``[E, I, D]``.

Biases: ``b_gate``/``b_up`` ``[E, I]``, ``b_down`` ``[E, D]``. ``activation``: ``silu``,
``gelu`` (erf), ``gelu_tanh`` or ``relu``. With ``act_limit`` set, the activation is the
clamped SwiGLU of gpt-oss: ``g = min(gate, limit)``, ``u = clamp(up, -limit, limit)``,
``(u + 1) * g * sigmoid(act_alpha * g)``.

Its fused form with the router, ``tract_moe_ffn``, is tract's own op
(:mod:`t2n.backends.tract.ops`).

The optional operands are present as their ``has_*`` attributes say, in the order above.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from t2n.ir.attributes import BOOL, FLOAT, NONE, STR, Attr, optional, required
from t2n.ir.infer_utils import InferError
from t2n.ir.schema import InferContext, OpTable
from t2n.ir.types import TensorType

TABLE = OpTable("moe")

ACTIVATIONS = ("silu", "gelu", "gelu_tanh", "relu")
LAYOUTS = ("linear", "canonical")

EXPERT_FLAGS = ("has_up", "has_gate_bias", "has_up_bias", "has_down_bias")
"""Optional operands of ``moe_experts``, in operand order after ``w_down``."""


def optional_operands(inputs: Sequence[Any], first: int, flags: Sequence[str],
                      attrs: Mapping[str, Any]) -> dict[str, Any]:
    """``flag name → operand`` of the optional operands present (from index ``first``)."""
    out: dict[str, Any] = {}
    at = first
    for flag in flags:
        if attrs.get(flag, False):
            out[flag] = inputs[at]
            at += 1
    return out


def _activation(h: np.ndarray, name: str) -> np.ndarray:
    from math import erf, sqrt

    if name == "silu":
        out = h / (1.0 + np.exp(-h))
    elif name == "relu":
        out = np.maximum(h, 0)
    elif name == "gelu_tanh":
        out = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
    else:
        out = 0.5 * h * (1 + np.vectorize(erf)(h / sqrt(2.0)))
    return np.asarray(out)


def expert_outputs(x: np.ndarray, w_gate: np.ndarray, w_down: np.ndarray, w_up: np.ndarray | None,
                   biases: Mapping[str, np.ndarray], attrs: Mapping[str, Any]) -> np.ndarray:
    """``[E, T, D]``: every expert's output for every token (f64)."""
    linear = attrs["layout"] == "linear"
    x = x.astype(np.float64)

    def project(w: np.ndarray) -> np.ndarray:
        return np.asarray(np.einsum("td,eid->eti" if linear else "td,edi->eti", x, w.astype(np.float64)))

    gate = project(w_gate)
    if "has_gate_bias" in biases:
        gate = gate + biases["has_gate_bias"][:, None, :]
    up = project(w_up) if w_up is not None else None
    if up is not None and "has_up_bias" in biases:
        up = up + biases["has_up_bias"][:, None, :]
    limit = attrs.get("act_limit")
    if limit is not None:
        assert up is not None
        g = np.minimum(gate, limit)
        u = np.clip(up, -limit, limit)
        h = (u + 1) * g / (1 + np.exp(-float(attrs.get("act_alpha") or 1.0) * g))
    else:
        h = _activation(gate, str(attrs["activation"]))
        if up is not None:
            h = h * up
    y = np.einsum("eti,edi->etd" if linear else "eti,eid->etd", h, w_down.astype(np.float64))
    if "has_down_bias" in biases:
        y = y + biases["has_down_bias"][:, None, :]
    return np.asarray(y)


def _eval_experts(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> list[np.ndarray]:
    x, index, weights, w_gate, w_down = xs[:5]
    extra = optional_operands(xs, 5, EXPERT_FLAGS, attrs)
    y = expert_outputs(x, w_gate, w_down, extra.pop("has_up", None), extra, attrs)
    routing = np.zeros((x.shape[0], w_gate.shape[0]))
    for t in range(x.shape[0]):
        for e, w in zip(index[t], weights[t]):
            routing[t, int(e)] += float(w)
    return [np.einsum("te,etd->td", routing, y).astype(x.dtype)]


def check_experts(x: TensorType, w_gate: TensorType, w_down: TensorType, layout: str, what: str) -> None:
    if layout not in LAYOUTS:
        raise InferError(f"{what}: layout must be one of {LAYOUTS}, got {layout!r}")
    if x.rank not in (2, 3) or w_gate.rank != 3 or w_down.rank != 3:
        raise InferError(f"{what}: x must be [T, D] (or [B, S, D]) and the expert weights rank 3, got "
                         f"{x.shape}, {w_gate.shape}, {w_down.shape}")
    if not x.dtype.is_float:
        raise InferError(f"{what}: x must be a float tensor, got {x.dtype}")
    d = x.shape[-1]
    d_gate = w_gate.shape[2] if layout == "linear" else w_gate.shape[1]
    d_down = w_down.shape[1] if layout == "linear" else w_down.shape[2]
    if isinstance(d, int) and (d != d_gate or d != d_down):
        raise InferError(f"{what}: the experts read and write {d_gate}/{d_down} features, x has {d}")


EXPERT_ATTRS: dict[str, Attr] = {
    "layout": required(STR), "activation": required(STR),
    "act_alpha": optional(FLOAT | NONE), "act_limit": optional(FLOAT | NONE),
}
"""The attributes of the experts' computation (``tract_moe_ffn`` takes them too, ``layout``
as ``expert_layout``)."""


@TABLE.op("moe_experts", evaluate=_eval_experts,
          attrs={**EXPERT_ATTRS, **{flag: optional(BOOL, False) for flag in EXPERT_FLAGS}})
def _moe_experts(ctx: InferContext) -> list[TensorType]:
    """Output: x's type. index [T, k] integers, weights [T, k] floats."""
    x, index, weights, w_gate, w_down = ctx.types[:5]
    check_experts(x, w_gate, w_down, str(ctx.attrs["layout"]), "moe_experts")
    if x.rank != 2 or index.rank != 2 or weights.rank != 2 or index.dtype.is_float or not weights.dtype.is_float:
        raise InferError("moe_experts: x must be [T, D], index [T, k] integers and weights [T, k] floats")
    if str(ctx.attrs["activation"]) not in ACTIVATIONS:
        raise InferError(f"moe_experts: activation must be one of {ACTIVATIONS}, got {ctx.attrs['activation']!r}")
    expected = 5 + sum(bool(ctx.attrs.get(f, False)) for f in EXPERT_FLAGS)
    if len(ctx.types) != expected:
        raise InferError(f"moe_experts: {expected} operands expected from its has_* attributes, got {len(ctx.types)}")
    if ctx.attrs.get("act_limit") is not None and not ctx.attrs.get("has_up"):
        raise InferError("moe_experts: the clamped SwiGLU (act_limit) needs the up projection")
    return [x]

