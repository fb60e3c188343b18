"""Core ATen spellings that `torch.jit.trace` records only when called directly (graphs
from torch.export and decompositions use them): each one run in the engines."""

from __future__ import annotations

import pytest
import torch

from t2n.testing import Lambda, check_export

aten = torch.ops.aten


X = torch.randn(2, 4, 6, 6)
W = torch.randn(3, 4, 3, 3)


@pytest.mark.parametrize("name, fn, args", [
    ("softmax", lambda x: (aten._softmax(x, -1, False), aten._log_softmax(x, 1, False)), (X,)),
    ("to_copy_alias_copy_fill", lambda x: (aten._to_copy(x, dtype=torch.float16).float(), aten.alias(x) + 1,
                                           aten.copy(x, x.flip(0))), (X,)),
    ("convolution", lambda x, w: aten.convolution(x, w, None, [1, 2], [1, 0], [1, 1], False, [0, 0], 1), (X, W)),
    ("adaptive", lambda x: (aten._adaptive_avg_pool2d(x, [4, 3]),
                            aten._adaptive_avg_pool3d(x.unsqueeze(0), [2, 5, 4])), (X,)),
    ("pool_with_indices", lambda x: (aten.max_pool2d_with_indices(x, [2, 2], [2, 2])[0],
                                     aten.max_pool3d_with_indices(x.unsqueeze(0), [2, 2, 2], [2, 2, 2])[0]), (X,)),
    ("native_norms", lambda x, w: (aten._native_batch_norm_legit(x, w[0, 0, 0].repeat(2)[:4], torch.tensor([0.5, -1.0, 0.25, 2.0]),
                                                                 torch.tensor([0.3, -0.7, 1.1, 0.0]),
                                                                 torch.tensor([0.6, 1.7, 2.5, 0.9]), False, 0.1, 1e-5)[0],
                                   aten.native_group_norm(x, None, None, 2, 4, 36, 2, 1e-5)[0]), (X, W)),
    ("native_dropout", lambda x: aten.native_dropout(x, 0.5, False)[0] * 2, (X,)),
    ("distances", lambda a, b: (aten._cdist_forward(a, b, 2.0, None), aten._pdist_forward(a[0], 1.0)),
     (torch.randn(2, 5, 3), torch.randn(2, 4, 3))),
    ("nonzero_of_a_constant", lambda x: x[:, aten.nonzero(torch.tensor([0, 1, 0, 1]))[:, 0]], (X,)),
])
def test_core_spelling(name, fn, args):
    check_export(Lambda(fn).eval(), args)


def test_embedding_bag_and_grid_sampler():
    w = torch.randn(10, 4)
    idx, offsets = torch.tensor([1, 2, 4, 5, 4, 3]), torch.tensor([0, 2])
    check_export(Lambda(lambda w, i, o: aten._embedding_bag(w, i, o, False, 0)[0]).eval(), (w, idx, offsets))
    grid = torch.rand(1, 3, 4, 2) * 2 - 1
    check_export(Lambda(lambda x, g: aten.grid_sampler_2d(x, g, 0, 0, False)).eval(), (X[:1], grid),
                 khronos_refuses="grid_sample")
