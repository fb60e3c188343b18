"""A broadcast (``expand``) read by a matrix product, directly or through a concat: tract
0.23.9 folds the broadcast into the product and gets it wrong (along the summed axis:
wrong numbers; along another axis: a model it refuses to load, as DPT's readout
projection of the CLS token concatenated to every patch). The tract target writes such a
broadcast as a copy it does not fold; each case runs in tract and the Khronos interpreter."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from t2n.testing import check_export


class Products(nn.Module):
    def __init__(self, form: str) -> None:
        super().__init__()
        self.form = form
        self.lin = nn.Linear(32, 8)
        self.proj = nn.Linear(64, 32)
        self.register_buffer("w", torch.randn(2, 32, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.form == "rows":  # the same row for every position of a 2-D product
            return x[:, 0].expand(16, 32) @ self.lin.weight.t()
        if self.form == "summed_axis":  # broadcast along the axis the product sums
            return self.lin(x[:, :4, :1].expand(1, 4, 32))
        if self.form == "batch":
            return torch.bmm(x[:, :4].expand(2, 4, 32), self.w)
        # DPT's readout "project": every patch with the CLS token, then a linear layer
        y = x + 1
        cls, rest = y[:, 0], y[:, 1:]
        return self.proj(torch.cat([rest, cls.unsqueeze(1).expand_as(rest)], -1))


@pytest.mark.parametrize("form", ["rows", "summed_axis", "batch", "readout_concat"])
def test_a_broadcast_read_by_a_product(form: str) -> None:
    check_export(Products(form), (torch.randn(1, 17, 32),))
