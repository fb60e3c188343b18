"""Forms that diffusers' models in the zoo (issue #39) found wrong; each runs in tract and
the Khronos interpreter."""

from __future__ import annotations

import torch
from torch import nn

from t2n.testing import check_export


class FramesLinear(nn.Module):
    """UNet3DConditionModel's temporal transformer: a video [B, C, F, H, W] regrouped to
    one sequence of frames per pixel, [B·H·W, F, C], then a linear layer (tract 0.23.9
    refused to load the rank-lifted ``linear`` after this reshape of the leading axis)."""

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(8, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, f, h, w = x.shape
        return self.l(x.permute(0, 3, 4, 2, 1).reshape(b * h * w, f, c))


def test_linear_after_a_reshape_of_the_leading_axis() -> None:
    check_export(FramesLinear(), (torch.randn(1, 8, 2, 8, 8),))


class RepeatedContextLinear(nn.Module):
    """UNetSpatioTemporalConditionModel: the image embedding repeated for every frame
    (a broadcast and a reshape that only drops a unit axis) read by the cross-attention's
    key projection; tract 0.23.9 loads it only as the rank-lifted ``linear``."""

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(16, 32)

    def forward(self, ctx: torch.Tensor) -> torch.Tensor:
        return self.l(ctx.unsqueeze(1).expand(-1, 2, -1, -1).reshape(2, 1, 16))


def test_linear_after_a_broadcast_over_frames() -> None:
    check_export(RepeatedContextLinear(), (torch.randn(1, 1, 16),))
