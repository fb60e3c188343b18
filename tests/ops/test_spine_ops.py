"""The first op set, each checked in tract and in the Khronos interpreter."""

import pytest
import torch
import torch.nn.functional as F

from t2n.testing import Lambda, check_export


def r(*shape):
    return torch.randn(*shape)


def bn(m):
    """Running statistics and affine parameters away from the identity, so a lowering
    that drops any of them fails."""
    m.running_mean.uniform_(-1, 1)
    m.running_var.uniform_(0.5, 2)
    m.weight.data.uniform_(0.5, 2)
    m.bias.data.uniform_(-1, 1)
    return m.eval()


CASES = {
    "linear": (torch.nn.Linear(6, 4), (r(2, 3, 6),)),
    "linear_nobias_1d": (torch.nn.Linear(6, 4, bias=False), (r(6),)),
    "matmul_batched_broadcast": (Lambda(torch.matmul), (r(2, 3, 4, 5), r(5, 6))),
    "matmul_vec": (Lambda(torch.matmul), (r(5), r(2, 5, 3))),
    "mm": (Lambda(torch.mm), (r(3, 4), r(4, 2))),
    "bmm": (Lambda(torch.bmm), (r(2, 3, 4), r(2, 4, 5))),
    "addmm": (Lambda(lambda b, x, y: torch.addmm(b, x, y, beta=0.5, alpha=2.0)), (r(2), r(3, 4), r(4, 2))),
    "conv1d": (torch.nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2), (r(2, 4, 17),)),
    "conv2d_groups": (torch.nn.Conv2d(4, 8, 3, padding=1, groups=2), (r(1, 4, 9, 7),)),
    "conv2d_same": (torch.nn.Conv2d(3, 5, (3, 4), padding="same", bias=False), (r(1, 3, 8, 8),)),
    "relu": (Lambda(torch.relu), (r(3, 4),)),
    "sigmoid": (Lambda(torch.sigmoid), (r(3, 4),)),
    "tanh": (Lambda(torch.tanh), (r(3, 4),)),
    "gelu": (torch.nn.GELU(), (r(3, 4),)),
    "gelu_tanh": (torch.nn.GELU(approximate="tanh"), (r(3, 4),)),
    "softmax_neg_axis": (Lambda(lambda x: torch.softmax(x, -1)), (r(2, 3, 5),)),
    "softmax_axis0": (Lambda(lambda x: F.softmax(x, dim=0)), (r(4, 3),)),
    "log_softmax": (Lambda(lambda x: F.log_softmax(x, dim=1)), (r(4, 3),)),
    "add_sub_mul_div_tensors": (Lambda(lambda a, b: (a + b, a - b, a * b, a / (b.abs() + 1))), (r(2, 3), r(3))),
    "scalars": (Lambda(lambda a: (a + 2, 3 - a, a * 0.5, a / 4, 2 ** a.clamp(-1, 1) if False else a - 1)), (r(4),)),
    "add_alpha": (Lambda(lambda a, b: torch.add(a, b, alpha=3)), (r(2, 3), r(2, 3))),
    "int_promotion": (Lambda(lambda a, i: a * i + i), (r(3), torch.arange(3))),
    "int_true_div": (Lambda(lambda i: i / 2), (torch.arange(6),)),
    "reshape_view": (Lambda(lambda x: (x.reshape(3, -1), x.view(-1), x.view(2, 2, 3))), (r(4, 3),)),
    "flatten_permute": (Lambda(lambda x: (x.flatten(1), x.permute(2, 0, 1), x.flatten())), (r(2, 3, 4),)),
    "transpose_t": (Lambda(lambda x, y: (x.transpose(-1, 0), y.t())), (r(2, 3, 4), r(3, 5))),
    "unsqueeze_squeeze": (Lambda(lambda x: (x.unsqueeze(-1), x.unsqueeze(0).squeeze(0), x.squeeze(1))), (r(3, 1, 4),)),
    "contiguous": (Lambda(lambda x: x.transpose(0, 1).contiguous()), (r(3, 4),)),
    "cat": (Lambda(lambda a, b: torch.cat([a, b, a], dim=-1)), (r(2, 3), r(2, 1))),
    "batch_norm": (bn(torch.nn.BatchNorm2d(3)), (r(2, 3, 4, 4),)),
    "batch_norm_1d": (bn(torch.nn.BatchNorm1d(5)), (r(4, 5),)),
    "max_pool1d": (torch.nn.MaxPool1d(3, stride=2, padding=1), (r(1, 2, 11),)),
    "max_pool2d_ceil": (torch.nn.MaxPool2d(3, stride=2, ceil_mode=True), (r(1, 2, 10, 9),)),
    "avg_pool1d": (torch.nn.AvgPool1d(3, stride=2, padding=1), (r(1, 2, 11),)),
    "avg_pool2d_exclude_pad": (torch.nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), (r(1, 2, 9, 9),)),
    "adaptive_avg_pool2d": (torch.nn.AdaptiveAvgPool2d((2, 3)), (r(1, 2, 8, 9),)),
    "adaptive_avg_pool2d_global": (torch.nn.AdaptiveAvgPool2d(1), (r(2, 3, 5, 7),)),
    "mean_sum": (Lambda(lambda x: (x.mean(), x.mean(dim=(1, -1), keepdim=True), x.sum(1), x.sum())), (r(2, 3, 4),)),
    "sum_int": (Lambda(lambda i: i.sum(0)), (torch.arange(12).reshape(3, 4),)),
    "constants": (Lambda(lambda x: x + torch.tensor([1.0, 2.0, 3.0])), (r(2, 3),)),
}


KHRONOS_REFUSES = {"sum_int": "i64 tensors"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op(name):
    model, args = CASES[name]
    check_export(model, args, khronos_refuses=KHRONOS_REFUSES.get(name, False))


def test_f16_in_tract():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 3)).half()
    check_export(model, (r(2, 8).half(),), targets=["tract"])
