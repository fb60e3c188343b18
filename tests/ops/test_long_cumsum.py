"""Cumulative sums over long axes: computed block by block (no n x n mask in the
artifact), with PyTorch's numbers in both engines, and a dynamic axis still dynamic."""

from __future__ import annotations

import pytest
import torch

import t2n
from t2n.testing import Lambda, check_dynamic, check_fn


@pytest.mark.parametrize("shape, dim", [((2, 64), 1), ((3, 65), -1), ((2, 1000, 3), 1), ((1000, 2), 0)])
def test_long_cumsum_matches_pytorch_in_both_engines(shape, dim):
    check_fn(lambda x: (x.cumsum(dim), torch.logcumsumexp(x, dim)), torch.randn(*shape))


def test_long_integer_cumsum_is_exact():
    x = torch.randint(-5000, 5000, (2, 700))  # sums stay exact in f32 too (Khronos)
    check_fn(lambda x: x.cumsum(1), x)


def test_long_cumsum_stores_no_quadratic_mask():
    art = t2n.compile(Lambda(lambda x: x.cumsum(1)), (torch.randn(2, 1000),))
    stored = sum(t.data.raw().size for t in art.rendered.tensors)
    assert stored < 10_000, f"{stored} numbers stored for a 1000-step cumulative sum"
    art.check()


def test_long_cumsum_over_a_dynamic_axis_is_one_loop_and_stays_dynamic():
    art = check_dynamic(Lambda(lambda x: (x.cumsum(1), torch.logcumsumexp(x, 1))),
                        lambda S: (torch.randn(2, S, 3),), {"input_0": {1: "S"}},
                        [{"S": 100}, {"S": 1}, {"S": 7}, {"S": 300}])
    text = art.graph_nnef
    assert text.count("tract_core_scan(") == 2 and "matmul" not in text, text
    assert sum(t.data.raw().size for t in art.rendered.tensors) < 100


def test_integer_running_sum_over_a_dynamic_axis_is_exact():
    check_dynamic(Lambda(lambda m: m.long().cumsum(-1) - 1), lambda S: (torch.arange(S) % 3 == 0,),
                  {"input_0": {0: "S"}}, [{"S": 50}, {"S": 2}, {"S": 513}])


def _scan_graph(x: str, zeros: str, axis: int) -> str:
    return (f"graph main(%x: {x}, %z: {zeros}) -> (%y) {{\n"
            f"  %y: {x} = cumsum_scan(%x, %z) {{axis={axis}}}\n}}\n")


@pytest.mark.parametrize("x, zeros, axis, why", [
    ("f32[2, 5]", "f32[2, 1]", 2, "axis 2 out of range for rank 2"),
    ("f32[2, 5]", "f32[2, 5]", 1, "length 1 on the axis"),
    ("f32[2, 5]", "f64[2, 1]", 1, "x's rank and dtype"),
    ("f32[2, 5]", "f32[1]", 1, "x's rank and dtype"),
])
def test_cumsum_scan_refuses_initial_sums_it_does_not_define(x, zeros, axis, why):
    from t2n.ir import parse_graph
    from t2n.ir.infer_utils import InferError

    parse_graph(_scan_graph("f32[2, 5]", "f32[2, 1]", 1))  # the well-formed op parses
    with pytest.raises(InferError, match=why):
        parse_graph(_scan_graph(x, zeros, axis))
