"""Convolutions and transposed convolutions with all their options, in both engines."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from t2n.testing import check_export


@pytest.mark.parametrize("conv, shape", [
    (nn.Conv1d(4, 6, 3, stride=2, padding=1), (2, 4, 11)),
    (nn.Conv1d(4, 8, 5, dilation=2, groups=2, bias=False), (1, 4, 20)),
    (nn.Conv1d(4, 4, 4, padding="same"), (1, 4, 9)),
    (nn.Conv1d(4, 4, 3, padding="valid", padding_mode="reflect"), (1, 4, 9)),
    (nn.Conv2d(3, 6, 3, padding=1, padding_mode="reflect"), (1, 3, 7, 8)),
    (nn.Conv2d(3, 6, 3, padding=2, padding_mode="replicate"), (1, 3, 7, 8)),
    (nn.Conv2d(3, 6, (3, 2), padding=(1, 2), padding_mode="circular"), (1, 3, 7, 8)),
    (nn.Conv2d(6, 6, 3, groups=6, stride=(2, 1)), (2, 6, 9, 8)),
    (nn.Conv2d(4, 6, (2, 4), padding="same", dilation=(2, 1)), (1, 4, 8, 9)),
    (nn.Conv3d(2, 4, 3, padding=1, stride=(1, 2, 2)), (1, 2, 5, 6, 7)),
    (nn.Conv3d(2, 4, (1, 3, 3), groups=2, bias=False), (1, 2, 3, 6, 6)),
])
def test_conv_options(conv, shape):
    torch.manual_seed(0)
    check_export(conv.eval(), (torch.randn(*shape),))


def test_unbatched_conv():
    check_export(nn.Conv1d(3, 5, 3).eval(), (torch.randn(3, 10),))


@pytest.mark.parametrize("deconv, shape", [
    (nn.ConvTranspose1d(4, 6, 3), (1, 4, 7)),
    (nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1), (2, 4, 7)),
    (nn.ConvTranspose1d(4, 6, 3, groups=2, dilation=2, bias=False), (1, 4, 7)),
    (nn.ConvTranspose1d(4, 6, 2, stride=3, output_padding=2), (1, 4, 5)),
    (nn.ConvTranspose2d(4, 6, 3, stride=2), (1, 4, 5, 6)),
    (nn.ConvTranspose2d(4, 8, (3, 2), stride=(2, 1), padding=(1, 0), output_padding=(1, 0), groups=4),
     (1, 4, 5, 6)),
    (nn.ConvTranspose2d(6, 3, 4, stride=2, padding=1), (1, 6, 4, 4)),
    (nn.ConvTranspose3d(2, 4, 3, stride=2, padding=1, output_padding=1), (1, 2, 3, 4, 4)),
])
def test_transposed_conv_options(deconv, shape):
    torch.manual_seed(0)
    check_export(deconv.eval(), (torch.randn(*shape),))


def test_f16_conv():
    # the Khronos interpreter runs f16 convolutions with f32 biases and fails
    check_export(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ConvTranspose2d(4, 2, 2, stride=2)).half().eval(),
                 (torch.randn(1, 3, 6, 6).half(),), targets=("tract",))
