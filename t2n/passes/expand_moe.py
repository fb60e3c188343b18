"""The routed experts of a mixture-of-experts block in standard operations.

:class:`ExpandMoeExperts` writes each ``moe_experts`` op (see :mod:`t2n.ir.ops.moe`) as
one batched product per projection over every expert, then the sum of the experts'
outputs weighted by a dense ``[T, E]`` routing matrix (zero for the experts a token did
not choose)::

    gate = x @ w_gateᵀ         [E, T, I]   (x broadcast over the experts)
    h    = act(gate) * up      [E, T, I]
    y    = h @ w_downᵀ         [E, T, D]
    r    = Σ_k onehot(index[:, k]) · weights[:, k]     [T, E]
    out  = Σ_e y[e] · r[:, e]  [T, D]

Every expert runs on every token (``E / k`` times the work of the routed product), but
only standard operations are used: the form of a target without tract's
``tract_moe_ffn`` (Khronos NNEF, tract before 0.23.9), and of blocks whose router
:class:`~t2n.backends.tract.passes.moe.FuseMoeRouter` does not recognize. Every built-in
target runs this pass last among its own (:meth:`t2n.Target.passes`).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from t2n.ir import Builder, DType, Graph, Op, Value
from t2n.ir.ops.moe import EXPERT_FLAGS, optional_operands
from t2n.passes.rewrite import Pattern, PatternPass


def _activation(b: Builder, gate: Value, up: Value | None, op: Op) -> Value:
    attrs_ = op.attrs
    dt = gate.type.dtype
    limit = attrs_.get("act_limit")
    if limit is not None:  # gpt-oss's clamped SwiGLU
        assert up is not None
        g = b.op("min", gate, b.const(np.array(limit, dt.numpy)))
        u = b.op("max", b.op("min", up, b.const(np.array(limit, dt.numpy))), b.const(np.array(-limit, dt.numpy)))
        alpha = float(attrs_.get("act_alpha") or 1.0)
        glu = b.op("mul", g, b.op("sigmoid", b.op("mul", g, b.const(np.array(alpha, dt.numpy)))))
        return b.op("mul", b.op("add", u, b.const(np.array(1, dt.numpy))), glu)
    name = str(attrs_["activation"])
    if name in ("gelu", "gelu_tanh"):
        h = b.op("gelu", gate, approximate="tanh" if name == "gelu_tanh" else "none")
    else:
        h = b.op(name, gate)
    return h if up is None else b.op("mul", h, up)


def _project(b: Builder, x: Value, w: Value, bias: Value | None, linear: bool) -> Value:
    """``[E, T, out]``: every expert's projection of every token (plus its bias)."""
    y = b.op("matmul", x, w, transpose_a=False, transpose_b=linear)
    return y if bias is None else b.op("add", y, b.op("unsqueeze", bias, axes=[1]))


def _is_experts(graph: Graph, op: Op) -> bool | None:
    return True if op.kind == "moe_experts" else None


def expand(graph: Graph, op: Op, _: object = None) -> Value:
    """The standard-operations form of one ``moe_experts`` op (its output value)."""
    x, index, weights, w_gate, w_down = op.inputs[:5]
    extra = optional_operands(op.inputs, 5, EXPERT_FLAGS, op.attrs)
    linear = op.attrs["layout"] == "linear"
    dt = x.type.dtype
    b = Builder(graph, loc=op.loc)
    x3 = b.op("unsqueeze", x, axes=[0])
    gate = _project(b, x3, w_gate, extra.get("has_gate_bias"), linear)
    up = _project(b, x3, extra["has_up"], extra.get("has_up_bias"), linear) if "has_up" in extra else None
    h = _activation(b, gate, up, op)
    y = b.op("matmul", h, w_down, transpose_a=False, transpose_b=linear)
    if "has_down_bias" in extra:
        y = b.op("add", y, b.op("unsqueeze", extra["has_down_bias"], axes=[1]))
    experts = int(w_gate.type.shape[0])
    # compared as f32 (exact for any expert count): standard NNEF compares only reals
    ids = b.const(np.arange(experts, dtype=np.float32))
    chosen = b.op("eq", b.op("unsqueeze", b.cast(index, DType.F32), axes=[2]), ids)  # [T, k, E]
    w = b.op("unsqueeze", b.cast(weights, dt), axes=[2])
    routing = b.op("select", chosen, w, b.const(np.array(0, dt.numpy)))
    routing = b.op("sum_reduce", routing, axes=[1], keepdims=False)  # [T, E]
    routing = b.op("unsqueeze", b.op("transpose", routing, perm=[1, 0]), axes=[2])  # [E, T, 1]
    return b.op("sum_reduce", b.op("mul", y, routing), axes=[0], keepdims=False)


@attrs.frozen
class ExpandMoeExperts(PatternPass):
    """Every ``moe_experts`` op → standard operations (see the module's docstring)."""

    name = "expand-moe-experts"

    def patterns(self) -> list[Pattern[Any]]:
        return [Pattern("moe experts expanded", _is_experts, expand)]


__all__ = ["ExpandMoeExperts", "expand"]
