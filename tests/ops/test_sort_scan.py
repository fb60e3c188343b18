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


class SortsOfOneAxis(torch.nn.Module):
    """Stable sorts (ties keep their order), both directions, of axis 1 of a 3-D tensor."""

    def forward(self, x):
        up, up_order = torch.sort(x, dim=1, stable=True)
        down, down_order = torch.sort(x, dim=1, descending=True, stable=True)
        return up, up_order, down, down_order, torch.argsort(x[:, :, 0], dim=1, stable=True)


def _with_ties_and_nan(b: int, s: int, c: int, nan: bool = True) -> torch.Tensor:
    """Few distinct values (many ties), infinities and, for floats, NaN."""
    g = torch.Generator().manual_seed(s)
    x = torch.randint(-3, 4, (b, s, c), generator=g).float()
    x[0, 0, :] = float("inf")
    x[-1, -1, :] = -float("inf")
    if nan:
        x[0, s // 2, 0] = float("nan")
        x[-1, min(1, s - 1), c - 1] = float("nan")
    return x


def test_a_sort_along_a_dynamic_axis():
    """tract's top-k cannot run a k made from a symbol, so a sort of a dynamic axis is
    written with comparisons (backends/tract/passes/dynamic_sort.py): the order of
    PyTorch's stable sort, ties, infinities and NaN (the largest) included, at lengths
    other than the traced one."""
    check_dynamic(SortsOfOneAxis(), lambda S: (_with_ties_and_nan(2, S, 3),), {"input_0": {1: "S"}},
                  [{"S": 5}, {"S": 1}, {"S": 12}])


def test_a_sort_of_integers_along_a_dynamic_axis():
    check_dynamic(Lambda(lambda x: (*torch.sort(x, dim=0, stable=True),
                                    *torch.sort(x, dim=0, descending=True, stable=True))),
                  lambda B: (_with_ties_and_nan(B, 4, 1, nan=False)[..., 0].clone().clamp(-9, 9).long(),),
                  {"input_0": {0: "B"}}, [{"B": 6}, {"B": 2}, {"B": 9}])


@pytest.mark.parametrize("frontend", ["jit", "export"])
def test_top_k_of_the_whole_dynamic_axis_is_a_sort(frontend):
    """``torch.topk(x, x.shape[d], d)``: its ``k`` follows the axis (not the traced length),
    values and indices at every length (distinct values: top-k orders ties as it likes)."""
    check_dynamic(Lambda(lambda x: (*torch.topk(x, x.shape[1], dim=1), *torch.topk(x, x.shape[-1], largest=False))),
                  lambda S: (distinct(3, S),), {"input_0": {1: "S"}}, [{"S": 9}, {"S": 2}, {"S": 23}],
                  frontend=frontend)


def test_a_sort_of_a_static_axis_keeps_tracts_top_k():
    import t2n

    art = t2n.compile(SortRows(), (torch.randn(6, 3),), dynamic_axes={"input_0": {1: "C"}})
    assert "tract_core_topk" in art.graph_nnef
    art.check()
