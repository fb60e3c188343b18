"""Indexing, gathers, scatters and masks, in tract and the Khronos interpreter."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from t2n.testing import check_export, check_fn

X = torch.randn(3, 4, 5)


@pytest.mark.parametrize("name, fn", [
    ("where_tensor", lambda x: torch.where(x > 0, x, x * 2)),
    ("where_scalar", lambda x: torch.where(x > 0, x, 0.5)),
    ("where_int_promotes", lambda x: torch.where(x > 0, 1, 0)),
    ("masked_fill", lambda x: x.masked_fill(x < 0, -1.5)),
    ("masked_fill_broadcast_mask", lambda x: x.masked_fill(x[0, :, :1] < 0, float("-inf"))),
    ("masked_fill_inplace", lambda x: x.clone().masked_fill_(x > 0.5, 3.0)),
    ("tril", lambda x: x.tril()),
    ("tril_k", lambda x: x.tril(-1)),
    ("triu_k", lambda x: torch.triu(x, 2)),
    ("diagonal", lambda x: x.diagonal(0, 1, 2)),
    ("diagonal_offset", lambda x: torch.diagonal(x, -1, -1, 1)),
    ("index_fill", lambda x: x.index_fill(1, torch.tensor([0, -1]), 7.0)),
])
def test_masks_on_both_targets(name, fn):
    check_fn(fn, X)


def test_diag_builds_and_takes():
    check_fn(lambda v, m: (torch.diag(v), torch.diag(v, 1), torch.diag(v, -2), torch.diag(m, 1)),
        torch.randn(4), torch.randn(3, 5))


def test_where_with_int_and_bool_data():
    check_fn(lambda c, a, b: (torch.where(c, a, b), torch.where(c, c, ~c)),
        torch.tensor([True, False, True]), torch.tensor([1, 2, 3]), torch.tensor([4, 5, 6]))


def test_one_hot():
    check_fn(lambda i: torch.nn.functional.one_hot(i, 6), torch.tensor([[0, 5, 2], [1, 1, 3]]),
        khronos_refuses=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_embedding(dtype):
    emb = nn.Embedding(10, 4, padding_idx=0).to(dtype)
    check_export(emb.eval(), (torch.tensor([[0, 3, 9], [2, 2, 1]]),), khronos_refuses=False)


@pytest.mark.parametrize("name, fn", [
    ("index_select", lambda x: x.index_select(1, torch.tensor([3, 0, 1]))),
    ("index_select_0d", lambda x: x.index_select(-1, torch.tensor(2))),
    ("getitem_tensor", lambda x: x[torch.tensor([2, 0])]),
    ("getitem_axis1", lambda x: x[:, torch.tensor([[1, -1], [0, 2]])]),
    ("getitem_two_adjacent", lambda x: x[:, torch.tensor([0, 2]), torch.tensor([1, 4])]),
    ("getitem_two_apart", lambda x: x[torch.tensor([0, 2]), :, torch.tensor([1, -1])]),
    ("getitem_const_mask", lambda x: x[:, torch.tensor([True, False, True, False])]),
    ("take", lambda x: torch.take(x, torch.tensor([[0, 7], [-1, 20]]))),
])
def test_gathers(name, fn):
    check_fn(fn, X)


def test_gather_elements_and_take_along_dim():
    # Khronos: a standard gather from the flattened input, positions computed on reals
    idx = torch.tensor([[[0, 1], [2, -1]], [[1, 1], [0, 0]], [[3, 2], [1, 0]]])
    check_fn(lambda x, i: (torch.gather(x, 1, i.abs() % 4), torch.gather(x[..., :2], -1, i.abs() % 2),
                      torch.take_along_dim(x[..., :2], (i.abs() % 3)[:, :1], 1)),
        X, idx)


def test_runtime_indices():
    # negative run-time indices are normalized with integer arithmetic (on reals in Khronos)
    check_fn(lambda x, i: (x[:, i], x.index_select(0, i.clamp(0, 2))), X, torch.tensor([1, -2, 3]))


@pytest.mark.parametrize("name, fn", [
    ("scatter_src", lambda x, i, s: x.scatter(1, i, s)),
    ("scatter_value", lambda x, i, s: x.scatter(1, i, 2.5)),
    ("scatter_add", lambda x, i, s: x.scatter_add(1, i, s)),
    ("scatter_reduce_sum", lambda x, i, s: x.scatter_reduce(1, i, s, "sum")),
    ("scatter_reduce_amax_excl", lambda x, i, s: x.scatter_reduce(1, i, s, "amax", include_self=False)),
    ("scatter_reduce_amin", lambda x, i, s: x.scatter_reduce(1, i, s, "amin")),
    ("scatter_reduce_prod", lambda x, i, s: x.scatter_reduce(1, i, s, "prod")),
    ("scatter_reduce_mean", lambda x, i, s: x.scatter_reduce(1, i, s, "mean")),
    ("scatter_reduce_mean_excl", lambda x, i, s: x.scatter_reduce(1, i, s, "mean", include_self=False)),
    ("index_add", lambda x, i, s: x.index_add(1, torch.tensor([0, 2]), s[:, :2], alpha=2)),
    ("index_copy", lambda x, i, s: x.index_copy(1, torch.tensor([3, 1]), s[:, :2])),
    ("index_put_accumulate", lambda x, i, s: x.index_put((torch.tensor([0, 0, 2]),), s[:, :1, :4].transpose(1, 2), accumulate=True)),
    ("index_put_axis1", lambda x, i, s: x.index_put((torch.tensor([0, 1, 2]), torch.tensor([3, -1, 0])),
                                                    torch.tensor(9.0))),
])
def test_scatters_tract(name, fn):
    x = torch.randn(3, 4, 5)
    i = torch.tensor([[[0, 1, 2, 3, 0]], [[1, 1, 2, 0, 3]], [[3, 2, 1, 0, 0]]]).expand(3, 2, 5).contiguous()
    s = torch.randn(3, 2, 5)
    check_fn(fn, x, i, s, khronos_refuses=True)


def test_select_and_slice_scatter_both_targets():
    check_fn(lambda x, y: (torch.select_scatter(x, y[:, 0], 1, -1),
                      torch.slice_scatter(x, y, 1, 1, 3),
                      torch.slice_scatter(x, y, 1, 0, 4, 2)),
        X, torch.randn(3, 2, 5))


def test_boolean_mask_index_exports_at_the_traced_count():
    """(Other counts: tests/ops/test_data_sized_selection.py.)"""
    check_fn(lambda x: x[x > 0], X, khronos_refuses="range")
