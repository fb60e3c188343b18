"""Normalization layers, each run in tract and in the Khronos interpreter."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from t2n.testing import Lambda, check_dynamic, check_export


def r(*shape):
    return torch.randn(*shape)


def stats(m):
    """Running statistics and affine parameters that are not the identity."""
    if m.track_running_stats:
        m.running_mean.uniform_(-1, 1)
        m.running_var.uniform_(0.5, 2)
    if m.affine:
        m.weight.data.uniform_(0.5, 2)
        m.bias.data.uniform_(-1, 1)
    return m


def affine(m):
    if m.weight is not None:
        m.weight.data.uniform_(0.5, 2)
    if getattr(m, "bias", None) is not None:
        m.bias.data.uniform_(-1, 1)
    return m


CASES = {
    "batch_norm_1d_nc": lambda: (stats(nn.BatchNorm1d(5)), (r(4, 5),)),
    "batch_norm_1d_ncl": lambda: (stats(nn.BatchNorm1d(3)), (r(2, 3, 7),)),
    "batch_norm_2d": lambda: (stats(nn.BatchNorm2d(3)), (r(2, 3, 4, 5),)),
    "batch_norm_3d": lambda: (stats(nn.BatchNorm3d(3)), (r(2, 3, 2, 3, 4),)),
    "batch_norm_no_affine": lambda: (stats(nn.BatchNorm2d(3, affine=False)), (r(2, 3, 4, 4),)),
    # eval mode without running statistics: PyTorch normalizes with the batch's own
    "batch_norm_batch_stats": lambda: (affine(nn.BatchNorm2d(3, track_running_stats=False)),
                                       (r(2, 3, 4, 4) * 3 + 1,)),
    "batch_norm_batch_stats_1d": lambda: (nn.BatchNorm1d(4, affine=False, track_running_stats=False),
                                          (r(5, 4) * 2 - 1,)),
    "batch_norm_training_flag": lambda: (Lambda(lambda x: F.batch_norm(
        x, torch.tensor([0.5, -1.0, 2.0]), torch.tensor([0.3, 2.0, 4.0]), torch.tensor([1.5, 0.5, 2.0]),
        torch.tensor([0.2, -0.3, 1.0]), training=True, eps=1e-3)),
                                         (r(4, 3, 2) + 2,)),
    "layer_norm_two_axes": lambda: (affine(nn.LayerNorm([4, 5])), (r(2, 3, 4, 5) * 2 + 1,)),
    "layer_norm_no_bias": lambda: (affine(nn.LayerNorm(5, bias=False)), (r(2, 3, 5),)),
    "layer_norm_no_affine": lambda: (nn.LayerNorm(6, elementwise_affine=False, eps=1e-3), (r(3, 6),)),
    "group_norm": lambda: (affine(nn.GroupNorm(2, 4)), (r(2, 4, 5, 3),)),
    "group_norm_no_spatial": lambda: (nn.GroupNorm(2, 4, affine=False), (r(3, 4),)),
    "group_norm_one_group": lambda: (affine(nn.GroupNorm(1, 6)), (r(2, 6, 5),)),
    "group_norm_per_channel": lambda: (affine(nn.GroupNorm(3, 3, eps=1e-2)), (r(2, 3, 2, 2, 2),)),
    "instance_norm_1d": lambda: (nn.InstanceNorm1d(4), (r(2, 4, 5) + 3,)),
    "instance_norm_2d_affine": lambda: (stats(nn.InstanceNorm2d(4, affine=True)), (r(2, 4, 5, 3),)),
    "instance_norm_3d": lambda: (nn.InstanceNorm3d(2), (r(1, 2, 3, 2, 4),)),
    # tracking running statistics: eval mode uses them, like batch norm
    "instance_norm_running_stats": lambda: (stats(nn.InstanceNorm1d(4, affine=True, track_running_stats=True)),
                                            (r(2, 4, 5),)),
    "rms_norm": lambda: (affine(nn.RMSNorm(5)), (r(2, 3, 5),)),
    "rms_norm_two_axes_eps": lambda: (affine(nn.RMSNorm([3, 5], eps=1e-3)), (r(2, 3, 5) * 0.01,)),
    "rms_norm_no_weight": lambda: (nn.RMSNorm(4, elementwise_affine=False), (r(3, 4) * 1e-3,)),
    "rms_norm_hand_written": lambda: (Lambda(lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * 2.0),
                                      (r(2, 3, 8),)),
}


class NativeLayerNorm(nn.Module):
    """The aten op behind export graphs, with its mean and 1/std outputs."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.rand(5) + 0.5)
        self.b = nn.Parameter(torch.rand(5))

    def forward(self, x):
        return torch.native_layer_norm(x, [5], self.w, self.b, 1e-5)


class NativeBatchNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = stats(nn.BatchNorm2d(3))

    def forward(self, x):
        bn = self.bn
        return torch.ops.aten._native_batch_norm_legit_no_training(
            x, bn.weight, bn.bias, bn.running_mean, bn.running_var, 0.1, 1e-5)[0]


CASES["native_layer_norm_three_outputs"] = lambda: (NativeLayerNorm(), (r(2, 3, 5) * 2 + 1,))
CASES["native_batch_norm_no_training"] = lambda: (NativeBatchNorm(), (r(2, 3, 4, 4),))


@pytest.mark.parametrize("name", sorted(CASES))
def test_norm_layer(name):
    model, args = CASES[name]()
    check_export(model, args)


def test_rms_norm_is_tract_fused_op_and_eps_none_is_machine_epsilon():
    """eps=None is f32's machine epsilon (tiny inputs make it visible); tract runs
    one tract_core_rms_norm, Khronos the composed form."""
    res = check_export(nn.RMSNorm(4, elementwise_affine=False), (r(2, 4) * 1e-4,))
    tract_text = res.artifacts["tract"].rendered.graph_nnef
    assert "tract_core_rms_norm(input_0, axis = 1, eps = 1.1920928955078125e-07)" in tract_text
    assert "rsqrt" in res.artifacts["khronos"].rendered.graph_nnef


def test_f16_layer_and_rms_norm_in_tract():
    model = nn.Sequential(nn.Linear(6, 6), nn.LayerNorm(6), nn.RMSNorm(6)).half()
    check_export(model, (r(2, 6).half(),), targets=["tract"])


def test_dynamic_axes_through_norms():
    model = nn.Sequential(nn.Conv1d(4, 4, 1), nn.GroupNorm(2, 4), nn.InstanceNorm1d(4),
                          nn.BatchNorm1d(4, track_running_stats=False))
    check_dynamic(model, lambda B, S: (r(B, 4, S),), {"input_0": {0: "B", 2: "S"}},
                  [{"B": 2, "S": 5}, {"B": 3, "S": 2}])
    check_dynamic(nn.LayerNorm(6), lambda B, S: (r(B, S, 6),), {"input_0": {0: "B", 1: "S"}},
                  [{"B": 2, "S": 5}, {"B": 1, "S": 1}])


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, -1), (3.0, 0)])
def test_functional_normalize(p, dim):
    check_export(Lambda(lambda x: F.normalize(x, p=p, dim=dim, eps=1e-3)), (r(3, 4, 5),))


def test_local_response_norm():
    check_export(nn.LocalResponseNorm(3, alpha=1e-2, beta=0.75, k=2.0), (r(2, 5, 4, 4),))


def test_embedding_padding_idx():
    emb = nn.Embedding(10, 3, padding_idx=0)
    check_export(emb, (torch.tensor([[1, 0, 4], [0, 9, 2]]),))
