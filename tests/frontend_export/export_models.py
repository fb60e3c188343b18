"""Small models for the export-frontend tests."""

import torch
from torch import nn


def convnet():
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(4 * 3 * 3, 5)).eval()


class WithConstants(nn.Module):
    """A tensor attribute that is neither parameter nor buffer, and one made in forward:
    torch.export lifts both as constants."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.scale = torch.tensor([1.0, 2.0, 3.0, 4.0])

    def forward(self, x):
        return self.lin(x) * self.scale + torch.tensor([0.5, 0.25, 0.0, 1.0])


class Nested(nn.Module):
    """Dict and tuple inputs, a keyword argument left at its default, dict/tuple outputs."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, inputs, pair, scale=None):
        a = self.lin(inputs["a"]) + pair[0]
        if scale is not None:
            a = a * scale
        return {"sum": a + pair[1], "parts": (a, inputs["b"] * 2)}


class Counter(nn.Module):
    """Writes its buffer in forward, then reads the written value."""

    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(4))

    def forward(self, x):
        self.count.add_(1)
        return x * self.count


class KeywordOnly(nn.Module):
    def forward(self, x, *, mask, bias=None):
        return x.masked_fill(mask, 0.0) + (0 if bias is None else bias)


class Tied(nn.Module):
    """One weight under two names (embedding and output projection)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 6)
        self.head = nn.Linear(6, 10, bias=False)
        self.head.weight = self.emb.weight
        self.norm = nn.LayerNorm(6)

    def forward(self, ids):
        return self.head(self.norm(self.emb(ids)))


class BesselBlock(nn.Module):
    def forward(self, x):
        return torch.special.bessel_j0(x)


class AiryBlock(nn.Module):
    def forward(self, x):
        return torch.special.airy_ai(x)


class ThreeUnsupported(nn.Module):
    """Three ops without a rule, in a nested module, a submodule and the top level."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(8, 8), BesselBlock())
        self.dec = AiryBlock()

    def forward(self, x):
        return self.dec(self.enc(x)), torch.special.i0e(x)
