"""In-place writes into views must reach their base (and the base's other views), as in
PyTorch: traced slice assignment is functionalized, never silently dropped."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from t2n.testing import Lambda, check_export


def positional_encoding(x: torch.Tensor) -> torch.Tensor:
    n, d = x.shape[-2], x.shape[-1]
    pe = torch.zeros(n, d)
    position = torch.arange(0, n, dtype=torch.float).unsqueeze(1)
    div = torch.exp(torch.arange(0, d, 2).float() * (-math.log(10000.0) / d))
    pe[:, 0::2] = torch.sin(position * div)
    pe[:, 1::2] = torch.cos(position * div)
    return x + pe


def assign_last_two(x, y):
    x = x.clone()
    x[..., :2] = y
    return x


def add_to_tail(x):
    x = x.clone()
    x[:, -3:] += 1
    return x


def zero_first_row(x):
    x = x.clone()
    x[0] = 0
    return x


def narrow_mul(x):
    x = x.clone()
    x.narrow(1, 2, 3).mul_(2)
    return x


def view_of_view(x):
    x = x.clone()
    x[1][:, 2] = 5
    return x


def through_transpose(x, v):
    x = x.clone()
    x.transpose(0, 1)[0] = v
    return x


def alias_read_after_write(x):
    x = x.clone()
    v = x[:, :2]
    x[:, 0] = 9
    return v + 0


def mask_assign(x):
    x = x.clone()
    x[x > 0.5] = 0
    return x


def index_assign(x, v):
    x = x.clone()
    x[torch.tensor([2, 0])] = v
    return x


def strided_odd_tail(x):
    x = x.clone()
    x[:, 1:4:2] = -x[:, 0:2]
    return x


def clamp_inplace_view(x):
    x = x.clone()
    x[:, :, 1:].clamp_(-0.1, 0.1)
    return x


def mutate_input(x):
    x[:, 0] = 1.0
    return x * 2


X = torch.randn(3, 5, 4)


@pytest.mark.parametrize("fn, args", [
    (positional_encoding, (torch.randn(2, 7, 6),)),
    (positional_encoding, (torch.randn(1, 9, 4),)),
    (assign_last_two, (X, torch.randn(3, 5, 2))),
    (add_to_tail, (X,)),
    (zero_first_row, (X,)),
    (narrow_mul, (X,)),
    (view_of_view, (X,)),
    (through_transpose, (X, torch.randn(3, 4))),
    (alias_read_after_write, (X,)),
    (mask_assign, (X,)),
    (strided_odd_tail, (X,)),
    (clamp_inplace_view, (X,)),
    (mutate_input, (X.clone(),)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_write_through_views_both_targets(fn, args):
    check_export(Lambda(fn).eval(), tuple(a.clone() for a in args))


def test_index_put_assignment_tract():
    check_export(Lambda(index_assign).eval(), (X, torch.randn(5, 4)), khronos_refuses="scatter_nd")


class Buffered(nn.Module):
    """A module that writes into a slice of its own buffer inside forward."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("cache", torch.zeros(2, 6, 4))

    def forward(self, x):
        cache = self.cache.clone()
        cache[:, 1:3] = x
        return cache.sum(1)


def test_write_into_a_copy_of_a_buffer():
    check_export(Buffered().eval(), (torch.randn(2, 2, 4),))
