"""compile(..., frontend="export"): models read by torch.export, lowered into the same
IR as the jit frontend, and run in tract against PyTorch."""

import pytest
import torch
from torch import nn

import t2n
from t2n.errors import InvalidArgumentError


def _convnet():
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(4 * 3 * 3, 5)).eval()


def test_mlp_matches_pytorch_in_tract():
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    art = t2n.compile(m, (torch.randn(2, 8),), frontend="export")
    assert art.check().ok
    assert "aten::linear" in art.ir.info.aten_ops  # kept whole, not decomposed to addmm


def test_convnet_matches_pytorch_in_tract():
    art = t2n.compile(_convnet(), (torch.randn(1, 3, 8, 8),), frontend="export")
    assert art.check().ok
    assert "aten::conv2d" in art.ir.info.aten_ops


def test_unknown_frontend_is_refused_before_anything_runs():
    with pytest.raises(InvalidArgumentError, match="frontend must be one of 'jit', 'export'"):
        t2n.compile(nn.ReLU(), (torch.randn(2),), frontend="fx")
