"""Linear and cubic interpolation: a matrix product along short axes (no transposes), two
or four gathers and their weighted sum along long ones (``GATHER_ABOVE``); PyTorch's
numbers in tract and the Khronos interpreter in both forms, mixed in one model, for every
``align_corners``, integer and fractional factors, up and down."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import t2n
from t2n.frontend.lowering.upsample import GATHER_ABOVE, linear_matrix, taps

MODES = {1: "linear", 2: "bilinear", 3: "trilinear"}


class Interp(nn.Module):
    def __init__(self, **how: object) -> None:
        super().__init__()
        self.how = how

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x, **self.how)


@pytest.mark.parametrize("shape, how", [
    ((1, 2, 100), {"mode": "linear", "scale_factor": 2, "align_corners": False}),
    ((2, 3, 70, 9), {"mode": "bilinear", "scale_factor": 1.5, "align_corners": False}),
    ((1, 2, 9, 80), {"mode": "bilinear", "size": (20, 50), "align_corners": True}),
    ((1, 1, 66, 5, 7), {"mode": "trilinear", "scale_factor": (0.5, 2.0, 3.0), "align_corners": False}),
    ((1, 2, 4, 5, 6), {"mode": "trilinear", "scale_factor": 2, "align_corners": True}),
    ((1, 1, 260, 6), {"mode": "bicubic", "scale_factor": 2, "align_corners": False}),
    ((1, 2, 7, 300), {"mode": "bicubic", "size": (11, 129), "align_corners": True}),
], ids=["1-D gathers", "2-D mixed x1.5", "2-D mixed down", "3-D mixed", "3-D matrices", "bicubic gathers",
        "bicubic mixed down"])
@pytest.mark.parametrize("target", [t2n.TractNNEF.latest(), t2n.KhronosNNEF()], ids=["tract", "khronos"])
def test_pytorch_numbers_in_both_forms(shape, how, target):
    module = Interp(**how).eval()
    x = torch.randn(*shape)
    artifact = t2n.compile(module, (x,), target)
    long_axes = sum(1 for d in shape[2:] if d > GATHER_ABOVE["cubic" if how["mode"] == "bicubic" else "linear"])
    assert (" gather(" in artifact.graph_nnef or "tract_core_gather(" in artifact.graph_nnef) == (long_axes > 0)
    assert " transpose(" not in artifact.graph_nnef
    assert artifact.check().ok


def test_the_matrix_rows_become_taps():
    m = linear_matrix(5, 10, False, 2.0)
    idx, w = taps(m)
    assert idx.shape == (10, 2)
    dense = np.zeros_like(m)
    for o in range(10):
        np.add.at(dense[o], idx[o], w[o])
    assert np.allclose(dense, m)


def test_a_dynamic_batch_with_the_matrix_form_along_a_middle_axis():
    module = Interp(mode="trilinear", scale_factor=2, align_corners=False).eval()
    artifact = t2n.compile(module, (torch.randn(1, 2, 3, 4, 5),), t2n.TractNNEF.latest(),
                           dynamic_axes={"input_0": {0: "N"}})
    x = torch.randn(3, 2, 3, 4, 5)
    assert artifact.check(inputs=[x.numpy()], expected=[module(x).numpy()]).ok
