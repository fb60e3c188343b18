"""Dynamic axes: symbols end to end, checked in tract at several sizes."""

import warnings

import pytest
import torch

import t2n
from t2n.errors import DynamicAxesError
from t2n.passes.dynamic_axes import BakedSizeWarning
from t2n.testing import check_dynamic


class ConvOverTime(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Conv1d(4, 8, 3, padding=1), torch.nn.ReLU(),
            torch.nn.Conv1d(8, 8, 5, stride=2, padding=2), torch.nn.ReLU(),
            torch.nn.Conv1d(8, 6, 3, dilation=2),
        )

    def forward(self, x):
        y = self.net(x)                      # [B, 6, T']
        b, c, t = y.shape
        return y.view(b, c * t), y.transpose(1, 2).reshape(b, -1, 3).mean(1)


def test_conv_stack_over_time():
    art = check_dynamic(
        ConvOverTime(), lambda T: (torch.randn(2, 4, T),), {"input_0": {2: "T"}},
        sizes=[{"T": 23}, {"T": 12}, {"T": 40}, {"T": 13}],
    )
    text = art.graph_nnef
    assert "extension tract_symbol T;" in text and "tract_assert T >= 1" in text
    assert "external<scalar>(shape = [2, 4, T])" in text
    assert "T" in str(art.ir.outputs[0].type.shape[1])


class Heads(torch.nn.Module):
    """view(b, n, heads, -1) from sizes, a matmul over the dynamic axis, a softmax."""

    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(8, 24)

    def forward(self, x):
        b, n, _ = x.shape
        qkv = self.qkv(x).view(b, n, 3, 2, 4).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = torch.softmax(q @ k.transpose(-1, -2) / 2.0, dim=-1)
        return (att @ v).transpose(1, 2).reshape(b, n, 8)


def test_attention_over_a_dynamic_axis():
    check_dynamic(Heads(), lambda S: (torch.randn(1, S, 8),), {"input_0": {1: "S"}},
                  sizes=[{"S": 5}, {"S": 1}, {"S": 12}])


class TwoSymbols(torch.nn.Module):
    def forward(self, x, past):
        return torch.cat([past, x], dim=1) * 2


def test_two_symbols_and_custom_assertion():
    art = check_dynamic(
        TwoSymbols(), lambda S, P: (torch.randn(1, S, 4), torch.randn(1, P, 4)),
        {"input_0": {1: "S"}, "input_1": {1: "P"}},
        sizes=[{"S": 3, "P": 5}, {"S": 1, "P": 0 + 1}, {"S": 7, "P": 2}],
        custom_extensions=["tract_assert S + P <= 4096"],
    )
    assert "P + S" in str(art.ir.outputs[0].type.shape[1])
    assert "extension tract_assert S + P <= 4096;" in art.graph_nnef


class Baked(torch.nn.Module):
    def forward(self, x):
        n = int(x.shape[1])          # a Python int: the trace bakes it
        return x.reshape(x.shape[0], n * 4)


def test_baked_size_is_reported_with_its_module():
    with pytest.warns(BakedSizeWarning, match="reshape"):
        t2n.compile(Baked(), (torch.randn(2, 6, 4),), dynamic_axes={"input_0": {1: "S"}})


def test_strictness_is_off_by_default_a_baked_size_warns_and_exports():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        art = t2n.compile(Baked(), (torch.randn(2, 6, 4),), dynamic_axes={"input_0": {1: "S"}})
    baked = [str(w.message) for w in caught if issubclass(w.category, BakedSizeWarning)]
    # one warning: the reshape whose size was baked, and the int() that baked it
    assert len(baked) == 1 and "reshape" in baked[0]
    assert "a tensor converted to a Python int" in baked[0] and "input 'input_0' axis 1 (symbol S)" in baked[0]
    assert "reshape" in art.graph_nnef  # the export went on, with the size baked in
    with pytest.raises(DynamicAxesError, match="reshape"):
        t2n.compile(Baked(), (torch.randn(2, 6, 4),), dynamic_axes={"input_0": {1: "S"}},
                    strict_dynamic_axes=True)


def test_no_warning_when_sizes_follow():
    with warnings.catch_warnings():
        warnings.simplefilter("error", BakedSizeWarning)
        t2n.compile(ConvOverTime(), (torch.randn(1, 4, 20),), dynamic_axes={"input_0": {2: "T"}})


@pytest.mark.parametrize("axes, message", [
    ({"nope": {0: "S"}}, "inputs are: input_0"),
    ({"input_0": {3: "S"}}, "out of range"),
    ({"input_0": {1: "1S"}}, "not a symbol name"),
    ({"input_0": {1: "graph"}}, "not a symbol name"),
])
def test_invalid_dynamic_axes(axes, message):
    with pytest.raises(DynamicAxesError, match=message):
        t2n.compile(Heads(), (torch.randn(1, 4, 8),), dynamic_axes=axes)


def test_khronos_refuses_dynamic_axes():
    with pytest.raises(DynamicAxesError, match="no symbolic dimensions"):
        t2n.compile(Heads(), (torch.randn(1, 4, 8),), t2n.KhronosNNEF(), dynamic_axes={"input_0": {1: "S"}})


def test_target_and_compile_axes_merge_and_must_agree():
    target = t2n.TractNNEF(dynamic_axes={"input_0": {1: "S"}})
    art = t2n.compile(Heads(), (torch.randn(1, 4, 8),), target)
    assert "tract_symbol S" in art.graph_nnef
    with pytest.raises(DynamicAxesError, match="symbol 'S' on the target"):
        t2n.compile(Heads(), (torch.randn(1, 4, 8),), target, dynamic_axes={"input_0": {1: "T"}})


def test_strict_dynamic_axes_turns_a_baked_size_into_an_error():
    with pytest.raises(DynamicAxesError, match="reshape"):
        t2n.compile(Baked(), (torch.randn(2, 6, 4),), dynamic_axes={"input_0": {1: "S"}},
                    strict_dynamic_axes=True)
    assert t2n.BakedSizeWarning is BakedSizeWarning
