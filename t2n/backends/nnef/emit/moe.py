"""The routed experts of a mixture-of-experts block (``moe_experts``, see
:mod:`t2n.ir.ops.moe`) have no operation of their own in any target: every built-in
target's passes write them as tract's ``tract_moe_ffn`` or in standard operations
(:class:`t2n.passes.expand_moe.ExpandMoeExperts`) before rendering. A graph that still
holds one (a pipeline or target without those passes) is refused, naming the pass."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable
from t2n.ir import Op

COMMON = EmitterTable("moe")


@COMMON.emitter("moe_experts")
def moe_experts(ctx: EmitContext, op: Op) -> None:
    ctx.unsupported("the routed experts of a mixture-of-experts block are written by a pass: run "
                    "t2n.passes.expand_moe.ExpandMoeExperts (every built-in target's passes do) "
                    "after the module extractors of t2n.frontend.transformers_experts")
