"""Graph shapes that tract 0.23.9 refused to load in an earlier emission (its optimizer
rewrites failed on them); t2n now writes forms it loads. Each runs in tract and Khronos."""

from __future__ import annotations

import torch
from torch import nn

from t2n.testing import check_export


class PatchSubsample(nn.Module):
    """LeViT: a strided slice right after a reshape that splits the same axis."""

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(8, 8)

    def forward(self, x):
        b, _, c = x.shape
        y = self.l(x)
        return self.l(y.view(b, 4, 4, c)[:, ::2, 1::2].reshape(b, -1, c)), y.view(b, 4, 4, c)[:, ::3]


class WindowPartitionLinear(nn.Module):
    """SAM: a linear layer right after a window partition."""

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(32, 96)

    def forward(self, x):
        b, h, w, c = x.shape
        x = x.view(b, h // 4, 4, w // 4, 4, c).permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, 4, 4, c)
        return self.l(x)


class BroadcastLinear(nn.Module):
    """DPT: a linear layer applied to a broadcast token."""

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(32, 8)

    def forward(self, cls, x):
        return self.l(cls.expand(x.shape[0], 16, 32)) + x


def test_strided_slice_after_reshape():
    check_export(PatchSubsample().eval(), (torch.randn(2, 16, 8),))


def test_linear_after_window_partition():
    check_export(WindowPartitionLinear().eval(), (torch.randn(1, 8, 8, 32),))


def test_linear_of_a_broadcast_tensor():
    check_export(BroadcastLinear().eval(), (torch.randn(1, 1, 32), torch.randn(3, 16, 8)))
