"""Less common ops: log-add-exp, Heaviside, sign bits, sliding windows, rotations,
order statistics, traces, grids."""

from __future__ import annotations

import torch

from t2n.testing import check_fn


def distinct(*shape):
    return torch.randperm(int(torch.tensor(shape).prod())).reshape(shape).float() / 5 - 2


def test_elementwise_extras():
    a, b = torch.randn(3, 4) * 30, torch.randn(3, 4)
    z = torch.tensor([-1.0, -0.0, 0.0, 2.0])
    check_fn(lambda a, b, z: (torch.logaddexp(a, b), torch.logaddexp2(a, b),
                              torch.heaviside(z, torch.tensor(0.5)), torch.signbit(z)), a, b, z)


def test_windows_rotations_grids():
    x = torch.randn(2, 7, 5)
    check_fn(lambda x: (x.unfold(1, 3, 2), x.unfold(-1, 2, 1), torch.rot90(x, 1, (1, 2)),
                        torch.rot90(x, 2), torch.rot90(x, -1, (0, 2)), torch.trace(x[0]),
                        *torch.meshgrid(x[0, :, 0], x[0, 0], indexing="ij"),
                        *torch.meshgrid(x[0, :, 0], x[0, 0], indexing="xy"),
                        torch.softmax(-x, 1) - torch.nn.functional.softmin(x, 1)), x)


def test_indices_constants():
    check_fn(lambda x: x[:, torch.triu_indices(4, 4, 1)[1]] + x[:, torch.tril_indices(4, 4)[0]].sum(),
             torch.randn(2, 4))


def test_order_statistics_tract():
    x = distinct(3, 5, 4)
    check_fn(lambda x: (x.median(), *x.median(1), *x.median(-1, keepdim=True), *x.kthvalue(2, 1),
                        torch.cummax(x, 1)[0], torch.cummin(x, -1)[0]), x, khronos_refuses="topk")
