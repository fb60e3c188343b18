"""diag_embed, masked_select/masked_scatter, data-dependent refusals (nonzero,
argwhere, run-time masked_select), x[mask] = row values, and dynamic-axis checks for
embedding, gather, tril/triu and diag_embed."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from t2n.errors import UnsupportedOpsError
from t2n.testing import Lambda, check_dynamic, check_fn

X = torch.randn(3, 4, 5)
MASK = torch.tensor([True, False, True, True, False])


def test_diag_embed_offsets_dims_and_dtypes():
    check_fn(lambda x: (torch.diag_embed(x), torch.diag_embed(x, 1, 0, 2), torch.diag_embed(x, -2, -1, 1),
                   torch.diag_embed((x * 3).long(), 1), torch.diag_embed(x > 0, -1),
                   torch.diag_embed(x[0, 0].half())), X)


def test_masked_select_and_scatter_with_a_constant_mask():
    check_fn(lambda x: (torch.masked_select(x, MASK), x.masked_scatter(MASK, torch.arange(60.0).reshape(6, 10))), X)


def test_masked_scatter_with_a_runtime_mask():
    # the running count of True is an integer prefix sum, used only as gather indices
    # (computed on reals in Khronos)
    check_fn(lambda x, s: (x.masked_scatter(x > 0, s), (x * 5).long().masked_scatter(x < 0, s.long()),
                      x.clone()[1].masked_scatter_(x[1] > 0, s)),
        X, torch.randn(70))


def test_mask_assignment_of_a_row_is_a_where():
    def assign(x):
        y = x.clone()
        y[x[..., 0] > 0] = torch.arange(5.0)
        return y.index_put_((x[..., 1] > 0,), torch.ones(1, 5), accumulate=True)

    check_fn(assign, X)


def test_masked_fill_out_of_place_takes_the_broadcast_shape():
    """As in PyTorch: ``x.masked_fill(mask, v)`` with a mask of more axes than ``x``."""
    check_fn(lambda x: x[0].masked_fill(x > 0, -1.0), X)


def test_a_write_sized_by_a_run_time_mask_is_refused_with_a_reason():
    """(Selections by such masks export: tests/ops/test_data_sized_selection.py.)"""
    with pytest.raises(UnsupportedOpsError, match="depends on the data"):
        check_fn(lambda x: x.clone().index_put_((x[..., 0] > -100,), torch.ones(12, 5)), X)  # 12 rows


class Embed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 4, padding_idx=0)

    def forward(self, i):
        return self.emb(i)


SIZES = [{"S": 5}, {"S": 1}, {"S": 9}]


def test_dynamic_sequence_axis():
    check_dynamic(Embed(), lambda S: (torch.randint(0, 20, (2, S)),), {"input_0": {1: "S"}}, SIZES)
    check_dynamic(Lambda(lambda x, i: torch.gather(x, 1, i)),
                  lambda S: (torch.randn(2, S, 3), torch.randint(0, S, (2, S, 3))),
                  {"input_0": {1: "S"}, "input_1": {1: "S"}}, SIZES)
    check_dynamic(Lambda(lambda x: (x.tril(), x.triu(1), x.masked_fill(
                      torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1), float("-inf")))),
                  lambda S: (torch.randn(2, S, S),), {"input_0": {1: "S", 2: "S"}}, SIZES)
    check_dynamic(Lambda(lambda x: torch.diag_embed(x, 1)), lambda S: (torch.randn(2, S),),
                  {"input_0": {1: "S"}}, SIZES)
