"""Emitters of the mixture-of-experts ops of :mod:`t2n.ir.ops.moe`.

``moe_ffn`` is tract's ``tract_moe_ffn`` (tract 0.23.9 and newer); it is made only by
:class:`t2n.backends.tract.passes.moe.FuseMoeRouter` for a target that has it. ``moe_experts`` has
no operation of its own in any target: :class:`t2n.backends.tract.passes.moe.ExpandMoeExperts`
writes it in standard operations before rendering, and an export that leaves it is
refused, naming that pass.
"""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.backends.nnef.versions import require
from t2n.ir import Op
from t2n.ir.ops.moe import FFN_FLAGS, optional_operands

COMMON = EmitterTable("moe")
TRACT = EmitterTable("moe/tract")

MOE_FFN = "tract_moe_ffn"

_NAMES = {"has_w3": "w3", "has_wg_bias": "wg_bias", "has_w1_bias": "w1_bias", "has_w3_bias": "w3_bias",
          "has_w2_bias": "w2_bias"}


@COMMON.emitter("moe_experts")
def moe_experts(ctx: EmitContext, op: Op) -> None:
    ctx.unsupported("the routed experts of a mixture-of-experts block are written by passes: run "
                    "t2n.backends.tract.passes.moe.ExpandMoeExperts (and FuseMoeRouter for tract 0.23.9+) "
                    "after the module extractors of t2n.llm.moe")


@COMMON.emitter("moe_ffn")
def moe_ffn(ctx: EmitContext, op: Op) -> None:
    ctx.unsupported(f"a mixture-of-experts block as one operation is tract's {MOE_FFN}; export for "
                    "TractNNEF 0.23.9 or newer, or keep the experts in standard operations "
                    "(t2n.backends.tract.passes.moe.ExpandMoeExperts without FuseMoeRouter)")


@TRACT.emitter("moe_ffn")
def moe_ffn_tract(ctx: EmitContext, op: Op) -> None:
    """``tract_moe_ffn(x, wg, w1, w2, w3 = ..., k, activation, gate, expert_layout, ...)``:
    optional operands and the clamped SwiGLU's constants as named arguments."""
    if not require(ctx, MOE_FFN, "a mixture-of-experts block as one operation"):
        return
    ctx.use_registry("tract_transformers")
    attrs = op.attrs
    named = {_NAMES[flag]: v for flag, v in optional_operands(op.inputs, 4, FFN_FLAGS, attrs).items()}
    x, wg, w1, w2 = op.inputs[:4]
    extra: dict[str, object] = {name: Raw(ctx.arg(v)) for name, v in named.items()}
    for name in ("act_alpha", "act_limit"):
        if attrs.get(name) is not None:
            extra[name] = float(attrs[name])
    ctx.emit(op.output, MOE_FFN, x, wg, w1, w2, k=int(attrs["k"]), activation=str(attrs["activation"]),
             gate=str(attrs["gate"]), expert_layout=str(attrs["expert_layout"]),
             **extra)


def q4_0_expert_problem(op: Op, index: int) -> str | None:
    """Why tract's ``tract_moe_ffn`` cannot take a Q4_0 weight at input ``index`` of
    ``moe_ffn`` ``op`` (None: it can). tract 0.23.9 runs Q4_0 experts (``w1``, ``w2``,
    ``w3``) in the ``linear`` layout, whose blocks run along each expert row's inputs,
    without expert biases, with the SiLU gate."""
    weights = (2, 3, 4) if op.attrs.get("has_w3") else (2, 3)
    if index not in weights:
        return "tract_moe_ffn at another operand than an expert weight"
    if op.attrs.get("expert_layout") != "linear":
        return "tract_moe_ffn with experts stored [in, out] (the canonical layout)"
    if any(op.attrs.get(f) for f in ("has_w1_bias", "has_w3_bias", "has_w2_bias")) or \
            op.attrs.get("act_limit") is not None or op.attrs.get("activation") != "silu":
        return "tract_moe_ffn with expert biases or another gate than SiLU"
    return None
