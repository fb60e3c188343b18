"""Distances, similarities, weight norm, grid sampling and fold/unfold."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from t2n.testing import check_export, check_fn


def test_distances_and_similarities():
    a, b = torch.randn(2, 5, 4), torch.randn(2, 3, 4)
    check_fn(lambda a, b: (torch.cdist(a, b), torch.cdist(a, b, p=1), torch.cdist(a, b, p=float("inf")),
                      F.cosine_similarity(a[:, :3], b, dim=-1), F.pairwise_distance(a[0, :3], b[0]),
                      F.pdist(a[0]), F.pdist(a[1], p=3)), a, b)


def test_weight_norm_module():
    torch.manual_seed(0)
    conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(3, 4, 3), dim=0)
    lin = nn.utils.parametrizations.weight_norm(nn.Linear(6, 2), dim=None)
    check_export(nn.Sequential(conv, nn.Flatten(0, -1), nn.Unflatten(0, (4, 6)), lin).eval(),
                 (torch.randn(1, 3, 8),))


GRID_CASES = [(m, p, a) for m in ("bilinear", "nearest", "bicubic")
              for p in ("zeros", "border", "reflection") for a in (False, True)
              if (m, p) != ("bicubic", "border")]  # refused: see the test below


@pytest.mark.parametrize("mode, padding, align", GRID_CASES)
def test_grid_sample_tract(mode, padding, align):
    torch.manual_seed(0)
    x = torch.randn(1, 2, 5, 6)
    grid = torch.rand(1, 3, 4, 2) * 2.4 - 1.2
    check_fn(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align),
        x, grid, khronos_refuses="grid_sample")


@pytest.mark.parametrize("kw", [dict(kernel_size=3), dict(kernel_size=(2, 3), stride=2, padding=1),
                                dict(kernel_size=2, dilation=2, stride=(1, 2))])
def test_unfold_and_fold(kw):
    x = torch.randn(2, 3, 7, 8)
    cols = F.unfold(x, **kw)
    check_fn(lambda x, c: (F.unfold(x, **kw), F.fold(c, (7, 8), **kw)), x, cols.clone())


def test_bicubic_border_grid_sample_is_refused():
    from t2n.errors import UnsupportedOpsError

    with pytest.raises(UnsupportedOpsError, match="bicubic"):
        check_fn(lambda x, g: F.grid_sample(x, g, mode="bicubic", padding_mode="border"),
            torch.randn(1, 1, 4, 4), torch.rand(1, 2, 2, 2))
