"""Reductions: every overload, keepdim both ways, negative and multiple axes, several
dtypes, in tract and the Khronos interpreter."""

from __future__ import annotations

import pytest
import torch

from t2n.testing import Lambda, check_dynamic, check_fn

X = torch.randn(3, 4, 5)


@pytest.mark.parametrize("name, fn", [
    ("sum_axes", lambda x: (x.sum((0, -1)), x.sum(-2, keepdim=True), x.sum())),
    ("mean_axes", lambda x: (x.mean((-1, 1), keepdim=True), x.mean())),
    ("max_all_dim", lambda x: (x.max(), *x.max(-1), *x.max(1, keepdim=True))),
    ("min_all_dim", lambda x: (x.min(), *x.min(0))),
    ("max_binary", lambda x: (torch.max(x, x.flip(0)), torch.min(x, x * 2))),
    ("amax_amin", lambda x: (x.amax((0, 2)), x.amin(-1, keepdim=True), x.amax())),
    ("aminmax", lambda x: torch.aminmax(x, dim=1)),
    ("argmax_argmin", lambda x: (x.argmax(-1), x.argmin(1, keepdim=True))),
    ("argmax_flat", lambda x: (x.argmax(), x.argmin(keepdim=True))),
    ("var_std", lambda x: (x.var(-1), x.std((0, 1), keepdim=True), x.var(1, correction=0),
                           x.std(unbiased=False))),
    ("var_mean", lambda x: (*torch.var_mean(x, -1), *torch.std_mean(x, (0, 2), correction=2))),
    ("norms", lambda x: (x.norm(), x.norm(dim=-1), torch.linalg.vector_norm(x, 1, (0, -1)),
                         torch.linalg.vector_norm(x, float("inf"), -1),
                         torch.linalg.vector_norm(x, float("-inf"), 1, keepdim=True),
                         torch.linalg.vector_norm(x, 3.0, -1), x.norm(p=0.5, dim=1))),
    ("logsumexp", lambda x: (x.logsumexp(-1), x.logsumexp((0, 1), keepdim=True))),
])
def test_float_reductions_both_targets(name, fn):
    check_fn(fn, X)


def test_prod_has_no_standard_form():
    check_fn(lambda x: (x.prod(-1), x.prod(1, keepdim=True), x.prod()), X, khronos_refuses="prod_reduce")


def test_extremes_propagate_nan():
    x = X.clone()
    x[1, 2, 3] = float("nan")
    check_fn(lambda x: (x.amax(-1), x.max(-1)[0], x.max()), x)


def test_any_all_count_nonzero():
    check_fn(lambda x: (x.any(-1), x.all(), (x > 0).any(0, keepdim=True), (x > -1).all((0, 1))),
        torch.tensor([[0.0, 1.0], [0.0, 0.0]]))
    check_fn(lambda x: (torch.count_nonzero(x, -1), x.any(1)), torch.tensor([[0, 3, 0], [1, 1, 0]]),
        khronos_refuses=True)


def test_integer_and_bool_reductions_tract():
    x = torch.tensor([[1, -2, 3], [4, 5, -6]], dtype=torch.int32)
    check_fn(lambda x: (x.sum(-1), x.sum(), x.prod(0), x.max(1), x.amin(0), x.argmax(-1)), x,
        khronos_refuses=True)
    check_fn(lambda m: (m.sum(-1), m.max()), torch.tensor([[True, False], [True, True]]),
        khronos_refuses=True)


def test_nan_reductions():
    x = X.clone()
    x[0, 1, 1] = float("nan")
    check_fn(lambda x: (x.nansum(-1), x.nanmean((0, 1)), x.nansum()), x)


def test_f16_reductions():
    check_fn(lambda x: (x.sum(-1), x.mean(0), x.amax(1), x.var(-1), x.norm(dim=-1)), X.half())


def test_mean_and_var_over_a_dynamic_axis():
    model = Lambda(lambda x: (x.mean(1), x.var(1), x.logsumexp(1), x.amax(1)))
    check_dynamic(model, lambda S: (torch.randn(2, S, 3),), {"input_0": {1: "S"}},
                  [{"S": 4}, {"S": 7}, {"S": 13}])
