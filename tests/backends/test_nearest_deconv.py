"""nearest-as-deconv: for tract 0.23.0 to 0.23.8, 2-D nearest upsampling by integer
factors runs as one ones-kernel deconv, bit-exact; every other upsampling keeps the tile
form and runs. (tract 0.23.9 gets its own ``nearest_upsample``: test_nearest_upsample.py.)"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import t2n
from t2n.backends.tract.passes import NearestAsDeconv
from t2n.ir import Graph


class Up(nn.Module):
    def __init__(self, conv_first: bool = False, **how: object) -> None:
        super().__init__()
        self.how = how
        self.conv = nn.Conv2d(3, 3, 3, padding=1) if conv_first else None

    def forward(self, x):
        y = torch.relu(self.conv(x)) if self.conv is not None else x
        return F.interpolate(y, **self.how)


DECONV_TRACT = t2n.TractNNEF("0.23.5")
"""A tract that gets the deconv form (0.23.9 gets nearest_upsample)."""


def tiles(text: str) -> int:
    return text.count(" tile(")


@pytest.mark.parametrize("how", [{"scale_factor": 2}, {"scale_factor": (3, 2)}, {"size": (10, 18)}], ids=repr)
def test_two_axes_become_one_exact_deconv(how):
    x = torch.randn(2, 3, 5, 6)
    artifact = t2n.compile(Up(mode="nearest", **how).eval(), (x,), DECONV_TRACT)
    assert artifact.graph_nnef.count(" deconv(") == 1 and tiles(artifact.graph_nnef) == 0
    assert artifact.stats["pass_stats"]["nearest-as-deconv.upsamplings"] == 2
    assert artifact.check("exact").ok


def test_dynamic_spatial_axes_stay_dynamic():
    module = Up(mode="nearest", scale_factor=2).eval()
    artifact = t2n.compile(module, (torch.randn(1, 3, 5, 6),), DECONV_TRACT,
                           dynamic_axes={"input_0": {2: "H", 3: "W"}})
    assert artifact.graph_nnef.count(" deconv(") == 1
    x = torch.randn(1, 3, 4, 9)
    assert artifact.check(inputs=[x.numpy()], expected=[module(x).numpy()], tolerance="exact").ok


@pytest.mark.parametrize("module, x", [
    (Up(conv_first=True, mode="nearest", scale_factor=2), torch.randn(1, 3, 5, 6)),  # tract fails conv → deconv
    (Up(mode="nearest", scale_factor=2), torch.randn(1, 3, 7)),  # 1-D
    (Up(mode="nearest", scale_factor=1.5), torch.randn(1, 3, 4, 6)),  # not an integer factor
    (Up(mode="bilinear", scale_factor=2), torch.randn(1, 3, 4, 6)),
], ids=["after a conv", "1-D", "factor 1.5", "bilinear"])
def test_other_upsamplings_keep_their_form(module, x):
    artifact = t2n.compile(module.eval(), (x,), DECONV_TRACT)
    assert " deconv(" not in artifact.graph_nnef
    assert artifact.check().ok


@pytest.mark.parametrize("target", [t2n.TractNNEF("0.22.4"), t2n.KhronosNNEF()], ids=["tract 0.22", "khronos"])
def test_only_tract_0_23_and_newer_gets_the_deconv(target):
    artifact = t2n.compile(Up(mode="nearest", scale_factor=2).eval(), (torch.randn(1, 3, 5, 6),), target)
    assert " deconv(" not in artifact.graph_nnef and tiles(artifact.graph_nnef) == 2


def test_debox_option_still_wins():
    target = t2n.TractNNEF.latest(upsample_with_debox=True)
    artifact = t2n.compile(Up(mode="nearest", scale_factor=2).eval(), (torch.randn(1, 3, 5, 6),), target)
    assert " debox(" in artifact.graph_nnef and " deconv(" not in artifact.graph_nnef


def test_pass_reports_no_change_on_a_graph_without_upsampling():
    result = NearestAsDeconv()(Graph())
    assert result.modified is False and not result.stats
