"""Cumulative ops, top-k/sort and binary search. Sort tests use inputs without ties:
which of two equal elements comes first is not specified by PyTorch's unstable sort."""

from __future__ import annotations

import pytest
import torch

from t2n.testing import Lambda, check_dynamic, check_fn


def distinct(*shape):
    return torch.randperm(int(torch.tensor(shape).prod())).reshape(shape).float() / 7 - 3


@pytest.mark.parametrize("name, fn", [
    ("cumsum", lambda x: (x.cumsum(-1), x.cumsum(0), torch.cumsum(x, 1, dtype=torch.float32))),
    ("cumprod", lambda x: (x.cumprod(-1), (x / 2).cumprod(1))),
    ("logcumsumexp", lambda x: torch.logcumsumexp(x, -1)),
])
def test_cumulative_float_both_targets(name, fn):
    check_fn(fn, torch.randn(3, 6, 5))


def test_cumulative_integers_exact_tract():
    x = torch.tensor([[3, -1, 7, 2, 9, 100000007], [1, 1, 1, 1, 1, 1]])
    check_fn(lambda x: (x.cumsum(-1), x.cumprod(1), (x > 1).cumsum(1)), x, khronos_refuses=True)


def test_cumsum_over_a_dynamic_axis():
    check_dynamic(Lambda(lambda x: x.cumsum(1)), lambda S: (torch.randn(2, S, 3),),
                  {"input_0": {1: "S"}}, [{"S": 3}, {"S": 8}, {"S": 17}])


@pytest.mark.parametrize("name, fn", [
    ("topk", lambda x: (*x.topk(3), *x.topk(2, dim=1, largest=False), *x.topk(1, 0))),
    ("sort", lambda x: (*x.sort(-1), *x.sort(1, descending=True), *torch.sort(x, dim=0, stable=True))),
    ("argsort", lambda x: (x.argsort(-1), x.argsort(0, descending=True))),
    ("msort", lambda x: torch.msort(x)),
])
def test_topk_and_sort_tract(name, fn):
    check_fn(fn, distinct(4, 5, 6), khronos_refuses="topk")


def test_sorting_integers_tract():
    check_fn(lambda x: (*x.sort(-1, descending=True), *x.topk(2)),
        torch.tensor([[5, -3, 9, 0], [2, 7, -8, 1]]), khronos_refuses="topk")


def test_searchsorted_and_bucketize_tract():
    seq = torch.tensor([-1.0, 0.5, 2.0, 4.0])
    batched = torch.sort(torch.randn(2, 5), -1)[0]
    vals = torch.tensor([[-2.0, 0.5, 3.0], [4.0, 5.0, 0.0]])
    check_fn(lambda s, b, v: (torch.searchsorted(s, v), torch.searchsorted(s, v, right=True),
                         torch.searchsorted(b, v, out_int32=True), torch.bucketize(v, s),
                         torch.bucketize(v, s, right=True)),
        seq, batched, vals, khronos_refuses=True)


class SortRows(torch.nn.Module):
    def forward(self, x):
        values, order = torch.sort(x, dim=0)
        return values * 2, order


def test_a_sort_along_a_dynamic_axis_is_refused_by_name():
    """tract's top-k cannot take a symbol's value as its k when it runs: refused at
    export, naming the sort (it used to be written with the traced length, and tract
    refused the artifact)."""
    import t2n
    from t2n.errors import NotExpressibleError

    x = torch.randn(6, 3)
    with pytest.raises(NotExpressibleError, match=r"aten::sort .*a sort along a dynamic axis \(B\)"):
        t2n.compile(SortRows(), (x,), dynamic_axes={"input_0": {0: "B"}})
    t2n.compile(SortRows(), (x,), dynamic_axes={"input_0": {1: "C"}}).check()  # the other axis may vary
