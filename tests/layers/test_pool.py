"""Pooling layers with all their options, in both engines."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from t2n.testing import check_export


@pytest.mark.parametrize("pool, shape", [
    (nn.MaxPool1d(3, stride=2, padding=1), (2, 3, 11)),
    (nn.MaxPool1d(2, ceil_mode=True), (1, 3, 9)),
    (nn.MaxPool2d(3, stride=2, dilation=2), (1, 2, 11, 12)),
    (nn.MaxPool2d((2, 3), stride=(2, 1), padding=(1, 1), ceil_mode=True), (1, 2, 7, 8)),
    (nn.MaxPool3d(2, stride=2, ceil_mode=True), (1, 2, 5, 6, 7)),
    (nn.AvgPool1d(3, stride=2, padding=1), (2, 3, 11)),
    (nn.AvgPool1d(3, stride=2, padding=1, count_include_pad=False), (2, 3, 11)),
    (nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True), (1, 2, 8, 9)),
    (nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False), (1, 2, 8, 9)),
    (nn.AvgPool2d(2, ceil_mode=True), (1, 2, 7, 7)),
    (nn.AvgPool2d(3, divisor_override=4), (1, 2, 7, 7)),
    (nn.AvgPool3d(2, stride=(1, 2, 2), padding=1, count_include_pad=False), (1, 2, 4, 5, 6)),
    (nn.AdaptiveAvgPool1d(4), (1, 3, 10)),
    (nn.AdaptiveAvgPool2d((3, 5)), (1, 2, 7, 11)),
    (nn.AdaptiveAvgPool2d((None, 2)), (1, 2, 7, 11)),
    (nn.AdaptiveAvgPool2d(1), (2, 3, 7, 5)),
    (nn.AdaptiveAvgPool3d((2, 3, 1)), (1, 2, 5, 7, 4)),
    (nn.AdaptiveMaxPool1d(3), (1, 3, 10)),
    (nn.AdaptiveMaxPool2d((4, 3)), (1, 2, 9, 7)),
])
def test_pool_options(pool, shape):
    check_export(pool.eval(), (torch.randn(*shape),))


def test_unbatched_pool():
    check_export(nn.MaxPool2d(2).eval(), (torch.randn(3, 6, 6),))


def test_pool_indices_are_exported_for_tract_and_refused_by_name_for_khronos():
    """The indices themselves are tested in test_pool_indices.py."""
    res = check_export(nn.MaxPool2d(2, return_indices=True).eval(), (torch.randn(1, 2, 4, 4),),
                       khronos_refuses="return_indices=True")
    assert "max_pool_with_index(" in res.artifacts["tract"].graph_nnef
