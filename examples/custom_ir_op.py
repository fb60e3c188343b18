"""A user IR op, from the aten op to tract, without editing t2n.

Run it:  python examples/custom_ir_op.py

Four pieces, each passed to one ``compile`` call (nothing global is changed):

1. the IR op ``user_mish``: an ``OpTable`` entry with its shape inference and a numpy
   evaluator (constant folding uses it: here, on a weight), in an ``OpSet``;
2. a lowering rule from ``aten::mish`` to that op, in a ``LoweringRegistry``
   (``override=True``: t2n has its own rule for mish, which this one replaces);
3. an emitter that writes the op as a call of the NNEF fragment ``user_mish``;
4. the fragment's NNEF text, given to the target with the emitter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

import t2n
from t2n.backends.nnef.context import EmitContext
from t2n.ir import InferContext, Op, OpSet, OpTable, TensorType, Value

USER_OPS = OpTable("user")


def mish_numpy(inputs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> list[np.ndarray]:
    """x * tanh(softplus(x)), softplus written so that exp does not overflow."""
    x = inputs[0]
    softplus = np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))
    return [(x * np.tanh(softplus)).astype(x.dtype)]


@USER_OPS.op("user_mish", evaluate=mish_numpy)
def infer_mish(ctx: InferContext) -> list[TensorType]:
    """Element-wise on a float tensor: the output has the input's type."""
    (x,) = ctx.types
    if not x.dtype.is_float:
        raise TypeError(f"user_mish takes a float tensor, got {x.dtype}")
    return [x]


OP_SET = OpSet.default().extended(USER_OPS)

RULES = t2n.RuleSet("user")


@RULES.rule("aten::mish")
def lower_mish(ctx: t2n.LoweringContext) -> Value:
    return ctx.b.op("user_mish", ctx.tensor(0))


REGISTRY = t2n.LoweringRegistry.default().extended(RULES, override=True)

MISH_FRAGMENT = """
fragment user_mish( x: tensor<scalar> ) -> ( y: tensor<scalar> )
{
    softplus = max(x, 0.0) + log(1.0 + exp(neg(abs(x))));
    y = x * tanh(softplus);
}
"""


def emit_mish(ctx: EmitContext, op: Op) -> None:
    ctx.emit(op.output, ctx.use_fragment("user_mish"), op.inputs[0])


TARGET = t2n.TractNNEF().with_emitters({"user_mish": emit_mish}, fragments={"user_mish": MISH_FRAGMENT})


class Gated(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.gate = torch.nn.Parameter(torch.linspace(-3.0, 3.0, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # mish of the weight is folded by the evaluator; mish of the activation is emitted
        return torch.nn.functional.mish(self.lin(x)) * torch.nn.functional.mish(self.gate)


def main() -> t2n.Artifact:
    torch.manual_seed(0)
    artifact = t2n.compile(Gated().eval(), (torch.randn(4, 8),), TARGET,
                           registry=REGISTRY, op_set=OP_SET, verify_ir=True)
    print(artifact.graph_nnef)
    print(artifact.check())
    return artifact


if __name__ == "__main__":
    main()
