"""tract's ``tract_moe_ffn`` (tract 0.23.9 and newer), the emitter of the IR op of the
same name (:mod:`t2n.backends.tract.ops`), made only by
:class:`t2n.backends.tract.passes.moe.FuseMoeRouter` for a target that has it."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.backends.tract.ops import MOE_FLAGS
from t2n.backends.tract.versions import require
from t2n.ir import Op
from t2n.ir.ops.moe import optional_operands

TRACT = EmitterTable("moe/tract")

MOE_FFN = "tract_moe_ffn"

_NAMES = {"has_w3": "w3", "has_wg_bias": "wg_bias", "has_w1_bias": "w1_bias", "has_w3_bias": "w3_bias",
          "has_w2_bias": "w2_bias"}


@TRACT.emitter("tract_moe_ffn")
def moe_ffn_tract(ctx: EmitContext, op: Op) -> None:
    """``tract_moe_ffn(x, wg, w1, w2, w3 = ..., k, activation, gate, expert_layout, ...)``:
    optional operands and the clamped SwiGLU's constants as named arguments."""
    if not require(ctx, MOE_FFN, "a mixture-of-experts block as one operation"):
        return
    ctx.use_registry("tract_transformers")
    attrs = op.attrs
    named = {_NAMES[flag]: v for flag, v in optional_operands(op.inputs, 4, MOE_FLAGS, attrs).items()}
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
    ``op`` (None: it can). tract 0.23.9 runs Q4_0 experts (``w1``, ``w2``, ``w3``) in the
    ``linear`` layout, whose blocks run along each expert row's inputs, without expert
    biases, with the SiLU gate."""
    weights = (2, 3, 4) if op.attrs.get("has_w3") else (2, 3)
    if index not in weights:
        return "tract_moe_ffn at another operand than an expert weight"
    if op.attrs.get("expert_layout") != "linear":
        return "tract_moe_ffn with experts stored [in, out] (the canonical layout)"
    if any(op.attrs.get(f) for f in ("has_w1_bias", "has_w3_bias", "has_w2_bias")) or \
            op.attrs.get("act_limit") is not None or op.attrs.get("activation") != "silu":
        return "tract_moe_ffn with expert biases or another gate than SiLU"
    return None
