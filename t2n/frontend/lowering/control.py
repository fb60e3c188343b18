"""TorchScript control flow: ``if`` on a constant condition and loops with a constant
trip count are lowered by lowering the branch taken, or the body once per iteration
(unrolled). Data-dependent control flow needs hardening first (``compile`` hardens
ScriptModules by default)."""

from __future__ import annotations

from typing import Any

import numpy as np

from t2n.frontend.context import LoweringContext, Poison
from t2n.frontend.registry import RuleSet
from t2n.ir import Value

RULES = RuleSet("control")

MAX_UNROLL = 4096


def _constant(ctx: LoweringContext, x: Any, what: str) -> Any:
    if isinstance(x, Poison):
        raise ctx.unsupported(f"{what} could not be computed (see the other problems)")
    if isinstance(x, Value):
        if x.known is None or x.known.dtype == object:
            raise ctx.unsupported(
                f"{what} depends on the input data; harden the module for the example inputs "
                "(t2n.harden_jit_for_export, done by compile for ScriptModules) or rewrite it"
            )
        return np.asarray(x.known).item()
    return x


@RULES.rule("prim::If")
def if_(ctx: LoweringContext) -> Any:
    cond = _constant(ctx, ctx.raw(0), "the condition of this if")
    block = list(ctx.node.blocks())[0 if cond else 1]
    ctx.lowering.lower_block(block)
    results = [ctx.lowering.env[v.unique()] for v in block.returnNode().inputs()]
    return results[0] if len(results) == 1 else tuple(results)


@RULES.rule("prim::Loop")
def loop(ctx: LoweringContext) -> Any:
    trips = _constant(ctx, ctx.raw(0), "the trip count of this loop")
    go = _constant(ctx, ctx.raw(1), "the condition of this loop")
    carried = [ctx.raw(i) for i in range(2, ctx.n_inputs)]
    (body,) = list(ctx.node.blocks())
    params = list(body.inputs())
    returns = list(body.returnNode().inputs())
    env = ctx.lowering.env
    i = 0
    while go and i < trips:
        if i == MAX_UNROLL:
            raise ctx.unsupported(f"a loop running more than {MAX_UNROLL} iterations is too long to unroll")
        env[params[0].unique()] = i
        for p, v in zip(params[1:], carried):
            env[p.unique()] = v
        ctx.lowering.lower_block(body)
        go = _constant(ctx, env[returns[0].unique()], "the condition of this loop")
        carried = [env[r.unique()] for r in returns[1:]]
        i += 1
    return carried[0] if len(carried) == 1 else tuple(carried)


@RULES.rule("prim::Uninitialized", "aten::warn", "prim::RaiseException")
def no_value(ctx: LoweringContext) -> Any:
    if ctx.kind == "prim::RaiseException":
        raise ctx.unsupported("the model raises an exception on the example inputs' path")
    return None
