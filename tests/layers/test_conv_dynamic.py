"""Convolutions, pooling and interpolation over dynamic axes: what stays dynamic is
right at every size in tract; what needs a static size is reported, never silent."""

from __future__ import annotations

import functools

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from t2n import TractNNEF, compile
from t2n.errors import DynamicAxesError
from t2n.testing import Lambda, check_dynamic, check_export


class Decoder(nn.Module):
    """Conv, pool, then grouped transposed convolutions (one with output_padding > padding,
    whose bias is added after an explicit pad)."""

    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv2d(2, 4, 3, padding=1, padding_mode="reflect")
        self.p = nn.MaxPool2d(2)
        self.d = nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.e = nn.ConvTranspose2d(4, 2, 2, stride=2, output_padding=1)

    def forward(self, x):
        return self.e(self.d(self.p(self.c(x))))


@pytest.mark.parametrize("axes, make, sizes", [
    ({0: "N"}, lambda N: (torch.randn(N, 2, 8, 6),), [{"N": 2}, {"N": 1}, {"N": 3}]),
    ({2: "H", 3: "W"}, lambda H, W: (torch.randn(1, 2, H, W),), [{"H": 8, "W": 6}, {"H": 4, "W": 10}]),
])
def test_transposed_convolutions_over_dynamic_axes(axes, make, sizes):
    torch.manual_seed(0)
    check_dynamic(Decoder(), make, {"x": axes}, sizes, input_names=["x"])


@pytest.mark.parametrize("pool", [
    nn.MaxPool1d(2, ceil_mode=True),
    nn.MaxPool1d(3, stride=2, padding=1, dilation=2, ceil_mode=True),
    nn.AvgPool1d(3, stride=2, padding=1, ceil_mode=True),
    nn.AvgPool1d(4, stride=3, padding=2, ceil_mode=True, count_include_pad=False),
    nn.AvgPool2d((1, 3), stride=(1, 2), padding=(0, 1), ceil_mode=True, divisor_override=2),
], ids=["max-k2", "max-dilated", "avg-include-pad", "avg-exclude-pad", "avg-divisor"])
@pytest.mark.parametrize("trace_at", [10, 9], ids=["traced-even", "traced-odd"])
def test_ceil_mode_pooling_over_a_dynamic_length(pool, trace_at):
    """The ceil-mode window count depends on the length's parity: it must follow the length."""
    rank = 4 if isinstance(pool, nn.AvgPool2d) else 3
    check_dynamic(pool, lambda T: (torch.randn(1, 2, *[1] * (rank - 3), T),), {"x": {rank - 1: "T"}},
                  [{"T": trace_at}, {"T": 19 - trace_at}, {"T": 7}, {"T": 12}], input_names=["x"])


@pytest.mark.parametrize("pool, shape", [
    (nn.AvgPool1d(3, stride=2, padding=1, ceil_mode=True), (1, 2, 6)),   # last window: padding only
    (nn.AvgPool2d(2, stride=2, padding=1, ceil_mode=True), (1, 2, 6, 7)),
    (nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True), (1, 1, 4, 5, 6)),
])
def test_ceil_mode_average_with_padding_in_both_engines(pool, shape):
    check_export(pool, (torch.randn(*shape),))


class SkipUp(nn.Module):
    """UNet-style: nearest upsampling to the skip connection's size (computed from shapes)."""

    def forward(self, x):
        small = F.max_pool1d(x, 2)
        return x + F.interpolate(small, size=x.shape[-1:], mode="nearest")


def test_nearest_to_a_computed_size_stays_dynamic():
    check_dynamic(SkipUp(), lambda T: (torch.randn(1, 2, T),), {"x": {2: "T"}},
                  [{"T": 8}, {"T": 4}, {"T": 12}], input_names=["x"])


def Interp(**kw):
    return Lambda(functools.partial(F.interpolate, **kw))


@pytest.mark.parametrize("model", [
    nn.AdaptiveAvgPool1d(3),
    nn.AdaptiveMaxPool1d(3),
    nn.AdaptiveAvgPool1d(8),            # the identity at the traced size
    Interp(size=8, mode="nearest"),     # a factor of 2 at the traced size
    Interp(scale_factor=1.5, mode="nearest"),
    Interp(scale_factor=2, mode="linear"),
], ids=["adaptive-avg", "adaptive-max", "adaptive-identity", "nearest-size", "nearest-x1.5", "linear"])
def test_static_only_forms_are_reported_over_a_dynamic_axis(model):
    with pytest.raises(DynamicAxesError, match="size of axis 2"):
        compile(model.eval(), (torch.randn(1, 2, 8),), TractNNEF(), dynamic_axes={"x": {2: "T"}},
                input_names=["x"], strict_dynamic_axes=True)
