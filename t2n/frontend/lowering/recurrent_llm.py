"""The recurrences of hybrid language models, recorded by the trace as the
``torch.library`` ops of ``t2n.llm.decoder.recurrent_ops`` (one node per layer and call), become
the IR ops of ``t2n.ir.ops.recurrent_llm`` with the same operands."""

from __future__ import annotations

from t2n.frontend.context import LoweringContext
from t2n.frontend.registry import RuleSet
from t2n.ir import Value

RULES = RuleSet("recurrent_llm")


@RULES.rule("t2n::gated_delta_rule")
def gated_delta_rule(ctx: LoweringContext) -> tuple[Value, ...]:
    names = ("query", "key", "value", "log_decay", "beta", "state")
    return ctx.b.multi("gated_delta_rule", *(ctx.tensor(n) for n in names), qk_l2norm=ctx.bool("qk_l2norm"))


@RULES.rule("t2n::ssm_scan")
def ssm_scan(ctx: LoweringContext) -> tuple[Value, ...]:
    return ctx.b.multi("ssm_scan", *(ctx.tensor(n) for n in ("decay", "update", "readout", "state")))
