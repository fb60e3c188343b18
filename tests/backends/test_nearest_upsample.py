"""nearest-upsample: for tract 0.23.9, nearest upsampling by integer factors is one
``nearest_upsample`` (tract's own resize op, the one its ONNX loader builds) in 1-D and
2-D and one tile of every axis in 3-D, after a convolution or not, bit-exact, dynamic axes
kept; other forms and other targets are untouched."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import t2n
from t2n.backends.tract.passes import NearestUpsample
from t2n.ir import Graph

CONV = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}


class Up(nn.Module):
    def __init__(self, conv: nn.Module | None = None, **how: object) -> None:
        super().__init__()
        self.how = how
        self.conv = conv

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x)) if self.conv is not None else x
        return F.interpolate(y, **self.how)


@pytest.mark.parametrize("shape, how", [
    ((2, 3, 7), {"scale_factor": 3}),
    ((2, 3, 5, 6), {"scale_factor": 2}),
    ((2, 3, 5, 6), {"scale_factor": (3, 2)}),
    ((2, 3, 5, 6), {"size": (10, 18)}),
    ((1, 1, 9, 4), {"scale_factor": (1, 4)}),
], ids=["1-D x3", "2-D x2", "2-D x3,x2", "2-D by size", "one axis"])
def test_one_op_bit_exact(shape, how):
    x = torch.randn(*shape)
    artifact = t2n.compile(Up(mode="nearest", **how).eval(), (x,), t2n.TractNNEF.latest())
    text = artifact.graph_nnef
    assert text.count("nearest_upsample(") == 1 and " tile(" not in text and " deconv(" not in text
    assert artifact.check("exact").ok


@pytest.mark.parametrize("how", [{"scale_factor": (2, 1, 3)}, {"size": (6, 8, 5)}, {"scale_factor": 2}], ids=repr)
def test_3d_is_one_tile_bit_exact(how):
    x = torch.randn(2, 3, 3, 4, 5)
    artifact = t2n.compile(Up(mode="nearest", **how).eval(), (x,), t2n.TractNNEF.latest())
    text = artifact.graph_nnef
    assert text.count(" tile(") == 1 and "nearest_upsample(" not in text
    assert artifact.check("exact").ok


def test_3d_twice_is_still_one_tile_and_dynamic():
    class Twice(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = F.interpolate(x, scale_factor=(2, 3, 1), mode="nearest")
            return F.interpolate(y, scale_factor=(1, 2, 1), mode="nearest")

    module = Twice().eval()
    artifact = t2n.compile(module, (torch.randn(1, 2, 3, 4, 5),), t2n.TractNNEF.latest(),
                           dynamic_axes={"input_0": {0: "N", 3: "H"}})
    assert artifact.graph_nnef.count(" tile(") == 1
    x = torch.randn(2, 2, 3, 7, 5)
    assert artifact.check(inputs=[x.numpy()], expected=[module(x).numpy()], tolerance="exact").ok


@pytest.mark.parametrize("dims, channels", [(1, 1), (1, 4), (2, 1), (2, 3), (3, 1), (3, 2)])
def test_after_a_convolution(dims, channels):
    """The chains tract 0.23.9 could not prepare with the deconv form (one channel, 1-D,
    3-D) run with tract's own op."""
    x = torch.randn(2, channels, *[5] * dims)
    module = Up(CONV[dims](channels, channels, 3, padding=1), mode="nearest", scale_factor=2).eval()
    artifact = t2n.compile(module, (x,), t2n.TractNNEF.latest())
    assert artifact.graph_nnef.count("nearest_upsample(" if dims < 3 else " tile(") == 1
    assert artifact.check().ok


def test_dynamic_axes_stay_dynamic():
    module = Up(mode="nearest", scale_factor=2).eval()
    artifact = t2n.compile(module, (torch.randn(1, 3, 5, 6),), t2n.TractNNEF.latest(),
                           dynamic_axes={"input_0": {0: "N", 2: "H", 3: "W"}})
    assert artifact.graph_nnef.count("nearest_upsample(") == 1
    x = torch.randn(2, 3, 4, 9)
    assert artifact.check(inputs=[x.numpy()], expected=[module(x).numpy()], tolerance="exact").ok


def test_f16():
    x = torch.randn(1, 3, 4, 5).half()
    artifact = t2n.compile(Up(mode="nearest", scale_factor=2).eval(), (x,), t2n.TractNNEF.latest())
    assert artifact.graph_nnef.count("nearest_upsample(") == 1
    assert artifact.check("exact").ok


@pytest.mark.parametrize("module, x", [
    (Up(mode="nearest", scale_factor=1.5), torch.randn(1, 3, 4, 6)),
    (Up(mode="bilinear", scale_factor=2), torch.randn(1, 3, 4, 6)),
], ids=["factor 1.5", "bilinear"])
def test_other_upsamplings_keep_their_form(module, x):
    artifact = t2n.compile(module.eval(), (x,), t2n.TractNNEF.latest())
    assert "nearest_upsample(" not in artifact.graph_nnef
    assert artifact.check().ok


@pytest.mark.parametrize("target", [t2n.TractNNEF("0.23.5"), t2n.TractNNEF("0.22.4"), t2n.KhronosNNEF()],
                         ids=["tract 0.23.5", "tract 0.22", "khronos"])
def test_only_tract_0_23_9_gets_it(target):
    artifact = t2n.compile(Up(mode="nearest", scale_factor=2).eval(), (torch.randn(1, 3, 5, 6),), target)
    assert "nearest_upsample(" not in artifact.graph_nnef


def test_the_debox_option_still_wins():
    target = t2n.TractNNEF.latest(upsample_with_debox=True)
    artifact = t2n.compile(Up(mode="nearest", scale_factor=2).eval(), (torch.randn(1, 3, 5, 6),), target)
    assert " debox(" in artifact.graph_nnef and "nearest_upsample(" not in artifact.graph_nnef


def test_the_ir_op_evaluates_as_repeats():
    from t2n.backends.tract.ops import _nearest_eval

    x = np.arange(12, dtype=np.float32).reshape(1, 2, 2, 3)
    got = _nearest_eval([x], {"factors": (2, 3)})[0]
    assert np.array_equal(got, x.repeat(2, 2).repeat(3, 3))


def test_pass_reports_no_change_on_a_graph_without_upsampling():
    result = NearestUpsample()(Graph())
    assert result.modified is False and not result.stats
