"""A module extractor: every ``GatedBlock`` exported as the user writes it, its forward
never traced.

Run it:  python examples/module_extractor.py

``GatedBlock.forward`` goes through NumPy, which PyTorch's tracer cannot record (the
trace would bake its result as a constant). ``t2n.ModuleExtractor(GatedBlock,
lower=lower_gated_block)`` makes each instance one unit of the trace: its real forward
still runs (the shapes of the rest of the model come from it), and the lowering calls
``lower_gated_block(ctx, module, x)`` with ``x`` an IR value. The rule builds the IR
with ``ctx.b`` and reads the module's weights with ``ctx.parameter(name)``, which
exports them under their state-dict names (``blocks.0.proj.weight``). The extractors
are a list given to one ``compile`` call: nothing global is registered.
"""

from __future__ import annotations

import numpy as np
import torch

import t2n
from t2n.ir import Value


class GatedBlock(torch.nn.Module):
    """``x + tanh(proj(x)) * sigmoid(gate)``, computed in NumPy."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(width, width)
        self.gate = torch.nn.Parameter(torch.randn(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(x).detach().numpy()
        g = 1 / (1 + np.exp(-self.gate.detach().numpy()))
        return x + torch.from_numpy(np.tanh(h) * g)


def lower_gated_block(ctx: t2n.ExtractorContext, module: GatedBlock, x: Value) -> Value:
    """The IR of ``GatedBlock.forward`` (built-in IR ops; a user op works the same way)."""
    b = ctx.b
    h = b.op("matmul", x, ctx.parameter("proj.weight"), transpose_a=False, transpose_b=True)
    h = b.op("add", h, ctx.parameter("proj.bias"))
    gated = b.op("mul", b.op("tanh", h), b.op("sigmoid", ctx.parameter("gate")))
    return b.op("add", x, gated)


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.Sequential(GatedBlock(8), torch.nn.ReLU(), GatedBlock(8))
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))


def main() -> t2n.CheckReport:
    torch.manual_seed(0)
    artifact = t2n.compile(Model(), (torch.randn(4, 8),),
                           extractors=[t2n.ModuleExtractor(GatedBlock, lower=lower_gated_block)])
    print(artifact.ir)
    report = artifact.check()  # runs the artifact in tract, compared with PyTorch
    print(report)
    return report


if __name__ == "__main__":
    main()
