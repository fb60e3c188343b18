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


def test_splits_broadcast_isclose():
    x = torch.randn(4, 6, 8)
    check_fn(lambda x: (*torch.hsplit(x, 2), *torch.vsplit(x, [1, 3]), *torch.dsplit(x, 4),
                        *torch.broadcast_tensors(x[:1], x[:, :1, :]),
                        torch.isclose(x, x + 1e-6), torch.isclose(x, x.flip(0), rtol=0.5, atol=0.5)), x)


def test_losses():
    import torch.nn.functional as F

    x, y = torch.randn(3, 5), torch.randn(3, 5)
    p, q = torch.sigmoid(x), torch.sigmoid(y)
    t = torch.tensor([1, 4, 0])
    check_fn(lambda x, y, p, q: (F.mse_loss(x, y), F.l1_loss(x, y, reduction="sum"),
                                 F.smooth_l1_loss(x, y, beta=0.5, reduction="none"), F.huber_loss(x, y, delta=0.7),
                                 F.binary_cross_entropy(p, q), F.binary_cross_entropy_with_logits(x, q),
                                 F.binary_cross_entropy_with_logits(x, q, pos_weight=torch.full((5,), 2.0)),
                                 F.kl_div(F.log_softmax(x, -1), F.softmax(y, -1), reduction="batchmean"),
                                 F.kl_div(x, y, reduction="sum", log_target=True)), x, y, p, q)
    check_fn(lambda x, t: (F.cross_entropy(x, t), F.cross_entropy(x, t, reduction="none", label_smoothing=0.1),
                           F.cross_entropy(x, t, ignore_index=4),
                           F.nll_loss(F.log_softmax(x, -1), t, reduction="sum")),
             x, t, khronos_refuses="on i64")
