"""Containers, reshaping modules, identities and shared modules."""

from __future__ import annotations

import torch
from torch import nn

from t2n.testing import check_export


class Containers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])
        self.heads = nn.ModuleDict({"a": nn.Linear(8, 4), "b": nn.Identity()})
        self.shared = nn.Linear(8, 8)
        self.seq = nn.Sequential(nn.Unflatten(1, (2, 2, 2)), nn.Flatten(1), nn.Dropout(0.5),
                                 nn.AlphaDropout(0.1))
        self.up = nn.Sequential(nn.Unflatten(1, (8, 1, 1)), nn.PixelShuffle(2), nn.Flatten())

    def forward(self, x):
        for block in self.blocks:
            x = torch.relu(block(x))
        x = self.shared(self.shared(x))  # one module called twice: one set of weights
        return self.heads["a"](x), self.heads["b"](self.seq(x)), self.up(x)


def test_containers_and_shared_modules():
    torch.manual_seed(0)
    res = check_export(Containers().eval(), (torch.randn(3, 8),))
    art = res.artifacts["tract"]
    labels = [op.attrs["label"] for op in art.ir.ops() if op.kind == "variable"]
    assert labels.count("shared.weight") == 1 and len(labels) == len(set(labels))
