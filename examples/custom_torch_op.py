"""A ``torch.library`` custom op exported through a user lowering rule.

Run it:  python examples/custom_torch_op.py

``@torch.library.custom_op("mylib::soft_clip", mutates_args=())`` with a fake (meta)
implementation is recorded by the trace as one node ``mylib::soft_clip``, whatever its
Python body does. A rule for that name, added to a copy of the default registry with
``t2n.LoweringRegistry.default().extended({...})`` and passed as
``compile(..., registry=...)``, builds its IR: it reads the op's arguments by their
schema names (``ctx.tensor("x")``, ``ctx.float("limit")``) and returns IR values. The
registry is an object of this call: other compile calls do not see the rule.
"""

from __future__ import annotations

import torch

import t2n
from t2n.ir import Value


@torch.library.custom_op("mylib::soft_clip", mutates_args=())
def soft_clip(x: torch.Tensor, limit: float) -> torch.Tensor:
    """``limit * tanh(x / limit)``: a smooth clamp to (-limit, limit)."""
    return (limit * torch.tanh(x / limit)).contiguous()


@soft_clip.register_fake
def _soft_clip_fake(x: torch.Tensor, limit: float) -> torch.Tensor:
    return torch.empty_like(x)


def lower_soft_clip(ctx: t2n.LoweringContext) -> Value:
    x, limit = ctx.tensor("x"), ctx.as_value(ctx.float("limit"))
    return ctx.b.op("mul", limit, ctx.b.op("tanh", ctx.b.op("div", x, limit)))


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return soft_clip(self.lin(x), 0.5) * 2


def registry() -> t2n.LoweringRegistry:
    return t2n.LoweringRegistry.default().extended({"mylib::soft_clip": lower_soft_clip})


def main() -> t2n.CheckReport:
    torch.manual_seed(0)
    artifact = t2n.compile(Model(), (torch.randn(3, 6) * 4,), registry=registry())
    print(artifact.ir)
    report = artifact.check()  # runs the artifact in tract, compared with PyTorch
    print(report)
    return report


if __name__ == "__main__":
    main()
