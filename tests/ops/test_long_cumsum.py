"""Cumulative sums over long axes: tract's native ``tract_core_cumsum`` where the target
has it (0.23.9+), else block by block (no n x n mask in the artifact) or one scan loop;
PyTorch's numbers in both engines, and a dynamic axis still dynamic."""

from __future__ import annotations

import pytest
import torch

import t2n
from t2n.testing import Lambda, check_dynamic, check_export, check_fn

OLD_TRACT = t2n.TractNNEF("0.23.0")
"""The last tested tract without ``tract_core_cumsum``."""


@pytest.mark.parametrize("shape, dim", [((2, 64), 1), ((3, 65), -1), ((2, 1000, 3), 1), ((1000, 2), 0)])
def test_long_cumsum_matches_pytorch_in_both_engines(shape, dim):
    check_fn(lambda x: (x.cumsum(dim), torch.logcumsumexp(x, dim)), torch.randn(*shape))


def test_long_integer_cumsum_is_exact():
    x = torch.randint(-5000, 5000, (2, 700))  # sums stay exact in f32 too (Khronos)
    check_fn(lambda x: x.cumsum(1), x)


@pytest.mark.parametrize("shape, dim", [((2, 1000, 3), 1), ((1000, 2), 0)])
def test_long_cumsum_in_tract_without_the_native_op_is_blocked(shape, dim):
    result = check_export(Lambda(lambda x: (x.cumsum(dim), torch.logcumsumexp(x, dim))),
                          (torch.randn(*shape),), targets=(OLD_TRACT,))
    text = result.artifacts["tract"].graph_nnef
    assert "tract_core_cumsum" not in text and "matmul(" in text, text


@pytest.mark.parametrize("target", [OLD_TRACT, t2n.KhronosNNEF()], ids=["tract-0.23.0", "khronos"])
def test_long_cumsum_stores_no_quadratic_mask(target):
    art = t2n.compile(Lambda(lambda x: x.cumsum(1)), (torch.randn(2, 1000),), target)
    stored = sum(t.data.raw().size for t in art.rendered.tensors)
    assert stored < 10_000, f"{stored} numbers stored for a 1000-step cumulative sum"
    art.check()


def test_long_cumsum_is_one_native_op_in_tract():
    art = t2n.compile(Lambda(lambda x: x.cumsum(1)), (torch.randn(2, 1000),))
    text = art.graph_nnef
    assert "tract_core_cumsum(input_0, axis = 1, exclusive = false, reverse = false)" in text, text
    assert "matmul" not in text and not art.rendered.tensors
    art.check()


def test_long_cumsum_over_a_dynamic_axis_is_native_and_stays_dynamic():
    art = check_dynamic(Lambda(lambda x: (x.cumsum(1), torch.logcumsumexp(x, 1))),
                        lambda S: (torch.randn(2, S, 3),), {"input_0": {1: "S"}},
                        [{"S": 100}, {"S": 1}, {"S": 7}, {"S": 300}])
    text = art.graph_nnef
    assert text.count("tract_core_cumsum(") == 2 and "tract_core_scan(" not in text, text
    assert "matmul" not in text and sum(t.data.raw().size for t in art.rendered.tensors) < 100


def test_long_cumsum_over_a_dynamic_axis_in_older_tract_is_one_loop():
    model = Lambda(lambda x: (x.cumsum(1), torch.logcumsumexp(x, 1))).eval()
    art = t2n.compile(model, (torch.randn(2, 100, 3),), OLD_TRACT, dynamic_axes={"input_0": {1: "S"}})
    text = art.graph_nnef
    assert text.count("tract_core_scan(") == 2 and "tract_core_cumsum" not in text and "matmul" not in text, text
    for size in (1, 7, 300):
        x = torch.randn(2, size, 3)
        expected = [t.numpy() for t in model(x)]
        art.check(inputs=[x.numpy()], expected=expected, symbols={"S": size})


@pytest.mark.parametrize("dtype", [torch.float16, torch.int32, torch.int64, torch.bool])
def test_native_cumsum_keeps_pytorch_dtypes_over_a_dynamic_axis(dtype):
    make = (lambda S: (torch.randn(3, S).to(dtype),)) if dtype.is_floating_point else \
        (lambda S: ((torch.arange(3 * S).reshape(3, S) % 5 - 2).to(dtype),))
    art = check_dynamic(Lambda(lambda x: x.cumsum(1)), make, {"input_0": {1: "S"}},
                        [{"S": 40}, {"S": 1}, {"S": 257}])
    assert "tract_core_cumsum(" in art.graph_nnef


def test_native_integer_cumsum_wraps_like_pytorch():
    x = torch.tensor([[2**62, 2**62, 2**62, 5]])  # beyond f64's exact range: no f64 detour
    result = check_fn(lambda x: x.cumsum(1), x, targets=("tract",), tolerance="exact")
    assert "tract_core_cast" not in result.artifacts["tract"].graph_nnef


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


_NATIVE_GRAPH = "graph main(%x: f32[2, 5]) -> (%y) {\n  %y: f32[2, 5] = cumsum(%x) {axis=1}\n}\n"


@pytest.mark.parametrize("target, names", [
    (OLD_TRACT, ("tract_core_cumsum", "0.23.0", "TractNNEF('0.23.9')")),
    (t2n.KhronosNNEF(), ("cumsum",)),
])
def test_a_native_cumsum_is_refused_by_targets_without_it(target, names):
    from t2n.errors import NotExpressibleError
    from t2n.ir import parse_graph

    t2n.TractNNEF().renderer().render(parse_graph(_NATIVE_GRAPH))  # the latest tract writes it
    with pytest.raises(NotExpressibleError) as info:
        target.renderer().render(parse_graph(_NATIVE_GRAPH))
    assert all(name in str(info.value) for name in names), str(info.value)


def test_native_cumsum_refuses_an_axis_out_of_range():
    from t2n.ir import parse_graph
    from t2n.ir.infer_utils import InferError

    with pytest.raises(InferError, match="cumsum: axis 2 out of range for rank 2"):
        parse_graph(_NATIVE_GRAPH.replace("axis=1", "axis=2"))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_native_half_cumsum_adds_up_in_f32_like_pytorch(dtype):
    x = torch.randn(3, 300).to(dtype)
    result = check_fn(lambda x: x.cumsum(1), x, targets=("tract",),
                      tolerance="approximate" if dtype is torch.float16 else "very_loose")  # bf16 runs as f16
    text = result.artifacts["tract"].graph_nnef
    assert "tract_core_cumsum(" in text and 'to = "f32"' in text, text
