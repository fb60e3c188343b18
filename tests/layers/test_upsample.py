"""Interpolation in every mode, by size or scale factor, align_corners both ways."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from t2n.testing import check_dynamic, check_export


class Interp(nn.Module):
    def __init__(self, **kw) -> None:
        super().__init__()
        self.kw = kw

    def forward(self, x):
        return F.interpolate(x, **self.kw)


@pytest.mark.parametrize("kw, shape", [
    (dict(scale_factor=2, mode="nearest"), (1, 2, 5)),
    (dict(scale_factor=(2, 3), mode="nearest"), (1, 2, 4, 5)),
    (dict(size=(7, 3), mode="nearest"), (1, 2, 4, 5)),
    (dict(scale_factor=1.7, mode="nearest"), (1, 2, 5, 6)),
    (dict(size=(9, 4), mode="nearest-exact"), (1, 2, 5, 6)),
    (dict(scale_factor=2, mode="linear"), (1, 2, 5)),
    (dict(size=8, mode="linear", align_corners=True), (1, 2, 5)),
    (dict(scale_factor=2, mode="bilinear"), (1, 2, 4, 5)),
    (dict(size=(7, 3), mode="bilinear", align_corners=True), (1, 2, 4, 5)),
    (dict(scale_factor=0.5, mode="bilinear"), (1, 2, 8, 6)),
    (dict(scale_factor=1.5, mode="bilinear", recompute_scale_factor=True), (1, 2, 5, 6)),
    (dict(scale_factor=2, mode="bicubic"), (1, 2, 4, 5)),
    (dict(size=(6, 9), mode="bicubic", align_corners=True), (1, 2, 4, 5)),
    (dict(scale_factor=2, mode="trilinear"), (1, 1, 3, 4, 2)),
    (dict(scale_factor=(1, 2, 2), mode="nearest"), (1, 1, 3, 4, 2)),
])
def test_interpolate_modes(kw, shape):
    torch.manual_seed(0)
    check_export(Interp(**kw).eval(), (torch.randn(*shape),))


def test_upsample_modules():
    model = nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv2d(2, 2, 3, padding=1),
                          nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                          nn.UpsamplingBilinear2d(size=(20, 18)))
    check_export(model.eval(), (torch.randn(1, 2, 4, 5),))


@pytest.mark.parametrize("kw, shape", [
    (dict(scale_factor=0.5, mode="bilinear"), (1, 2, 8, 8)),
    (dict(size=(5, 3), mode="bicubic"), (2, 3, 16, 11)),  # DINOv2's position table, resized
    (dict(scale_factor=(0.3, 2.5), mode="bicubic", align_corners=True), (1, 1, 10, 4)),
    (dict(size=(9, 20), mode="bilinear"), (1, 2, 6, 7)),  # upsampling: PyTorch's usual weights
], ids=["bilinear-half", "bicubic-size", "bicubic-mixed-align", "bilinear-up"])
def test_antialiased_interpolation(kw, shape):
    """``antialias=True`` resizes by PyTorch's own per-axis weights (wider than the plain
    modes' when shrinking), in tract and the Khronos interpreter."""
    torch.manual_seed(0)
    check_export(Interp(antialias=True, **kw).eval(), (torch.randn(*shape),))


class UpsampleNet(nn.Module):
    """A decoder-style net over a dynamic time axis: conv, nearest x2, conv."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv1d(3, 4, 3, padding=1)
        self.b = nn.Conv1d(4, 2, 3, padding=1)

    def forward(self, x):
        return self.b(F.interpolate(torch.relu(self.a(x)), scale_factor=2, mode="nearest"))


def test_nearest_upsampling_over_a_dynamic_axis():
    check_dynamic(UpsampleNet(), lambda T: (torch.randn(1, 3, T),), {"x": {2: "T"}},
                  [{"T": 5}, {"T": 8}, {"T": 13}], input_names=["x"])
