"""What TractNNEF(version) writes: an operation only for a tract that loads it (the table
in t2n.backends.tract.versions), the decomposed form for older ones, and a typed refusal
naming the version to use where no older form exists. Renders only (fast); the matrix
tests run the artifacts in the engines."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn as nn

import t2n
from t2n.backends.nnef.context import nnef_float
from t2n.backends.target import parse_version
from t2n.backends.tract.versions import TRACT_REQUIREMENTS, target_has, version_table_rows
from t2n.errors import NotExpressibleError
from tools.operator_table import tract_version_section


class _Fused(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(16, eps=1e-5)

    def forward(self, x):
        f = nn.functional
        return (self.norm(x), f.silu(x), f.gelu(x, approximate="tanh"), torch.isinf(x), torch.isnan(x),
                (x > 0).any(-1), (x > 0).all(-1), x)  # an input returned: a copy


FUSED = ["tract_core_rms_norm", "tract_core_silu", "tract_core_gelu_approx", "tract_core_is_inf",
         "tract_core_is_nan", "any_reduce", "all_reduce", "copy"]


def _calls(text: str) -> set[str]:
    return set(re.findall(r"\b(\w+)\(", text))


@pytest.mark.parametrize("version", ["0.21.19", "0.22.4"])
def test_older_targets_get_no_operation_their_tract_lacks(version):
    art = t2n.compile(_Fused().eval(), (torch.randn(3, 16),), t2n.TractNNEF(version))
    used = _calls(art.graph_nnef)
    assert not used & set(FUSED), f"{version} artifact uses {sorted(used & set(FUSED))}"
    assert {"sigmoid", "tanh", "rsqrt", "max_reduce", "min_reduce"} <= used  # the decomposed forms


def test_newest_target_keeps_the_fused_operations():
    art = t2n.compile(_Fused().eval(), (torch.randn(3, 16),), t2n.TractNNEF("0.23.9"))
    assert set(FUSED) <= _calls(art.graph_nnef)


def test_float_literals_never_have_a_signed_exponent():
    assert nnef_float(-3.4028234663852886e38) == "-3.4028234663852886e38"
    assert nnef_float(1e-5) == "1e-05"
    class Masked(nn.Module):
        def forward(self, x):
            return x.masked_fill(x > 0, torch.finfo(torch.float32).min)

    art = t2n.compile(Masked(), (torch.randn(2, 4),), t2n.TractNNEF("0.21.19"))
    assert "e+" not in art.graph_nnef and "e38" in art.graph_nnef


class _Sample(nn.Module):
    def forward(self, x, grid):
        return nn.functional.grid_sample(x, grid, align_corners=False)


def test_grid_sample_before_its_release_is_refused_naming_the_version_to_use():
    args = (torch.randn(1, 2, 4, 4), torch.rand(1, 3, 3, 2) * 2 - 1)
    with pytest.raises(NotExpressibleError) as err:
        t2n.compile(_Sample(), args, t2n.TractNNEF("0.23.2"))
    message = str(err.value)
    assert "grid_sample" in message and "0.23.2" in message and "TractNNEF('0.23.3')" in message
    t2n.compile(_Sample(), args, t2n.TractNNEF("0.23.3"))  # and the release that has it is fine


def test_topk_before_its_release_is_refused():
    class TopK(nn.Module):
        def forward(self, x):
            return torch.topk(x, 2).values

    with pytest.raises(NotExpressibleError, match=r"tract_core_topk.*0\.20\.0"):
        t2n.compile(TopK(), (torch.randn(3, 5),), t2n.TractNNEF("0.19.15"))


class _Positions(nn.Module):
    """Uses the dynamic length as a value (arange), not only as a shape."""

    def forward(self, x):
        return x + torch.arange(x.shape[1], dtype=torch.float32)


def test_symbol_as_operand_before_its_release_is_refused_naming_symbol_and_line():
    target = t2n.TractNNEF("0.21.0", dynamic_axes={"x": {1: "S"}})
    with pytest.raises(NotExpressibleError) as err:
        t2n.compile(_Positions(), (torch.randn(2, 5),), target, input_names=["x"])
    message = str(err.value)
    assert "'S'" in message and "tract_core_range" in message and "TractNNEF('0.21.5')" in message


def test_symbols_only_in_shapes_are_fine_before_that_and_have_no_assert_line():
    target = t2n.TractNNEF("0.21.0", dynamic_axes={"x": {1: "S"}})
    art = t2n.compile(nn.Sequential(nn.Linear(4, 4), nn.ReLU()).eval(), (torch.randn(2, 5, 4),), target,
                      input_names=["x"])
    assert "tract_symbol S" in art.graph_nnef and "tract_assert" not in art.graph_nnef
    newer = t2n.TractNNEF("0.21.19", dynamic_axes={"x": {1: "S"}})
    art = t2n.compile(nn.Sequential(nn.Linear(4, 4)).eval(), (torch.randn(2, 5, 4),), newer, input_names=["x"])
    assert "tract_assert S >= 1" in art.graph_nnef


@pytest.mark.parametrize("version", ["0.21.6", "0.21.7"])
def test_releases_that_cannot_load_symbolic_reshapes_refuse_dynamic_axes(version):
    target = t2n.TractNNEF(version, dynamic_axes={"x": {1: "S"}})
    with pytest.raises(NotExpressibleError, match=r"symbolic shape.*TractNNEF\('0\.21\.8'\)"):
        t2n.compile(nn.Sequential(nn.Linear(4, 4)).eval(), (torch.randn(2, 5, 4),), target, input_names=["x"])
    t2n.compile(nn.Sequential(nn.Linear(4, 4)).eval(), (torch.randn(2, 5, 4),), t2n.TractNNEF(version))


def test_table_versions_parse_and_are_within_what_t2n_targets():
    for req in TRACT_REQUIREMENTS.values():
        assert (0, 19, 0) < parse_version(req.since) <= (0, 23, 9), req
        assert req.older
    rows = version_table_rows()
    assert [parse_version(r[1]) for r in rows] == sorted(parse_version(r[1]) for r in rows)


def test_documentation_section_lists_every_row():
    text = tract_version_section()
    assert "## Minimum tract version per emitted operation" in text
    for name, since, _ in version_table_rows():
        assert name in text and since in text


def test_target_has_gates_by_the_tract_version():
    assert target_has(t2n.TractNNEF("0.23.9"), "tract_core_silu")
    assert target_has(t2n.TractNNEF("0.19.0"), "tract_core_erf")  # no entry: every version
    assert not target_has(t2n.TractNNEF("0.22.4"), "tract_core_silu")


def test_scatter_with_a_reduction_before_0_23_is_refused_not_silently_overwritten():
    class ScatterAdd(nn.Module):
        def forward(self, x, index):
            return x.scatter_add(0, index, x)

    args = (torch.randn(3, 4), torch.zeros(3, 4, dtype=torch.long))
    with pytest.raises(NotExpressibleError) as err:
        t2n.compile(ScatterAdd(), args, t2n.TractNNEF("0.22.4"))
    assert "scatter_add" in str(err.value) and "TractNNEF('0.23.0')" in str(err.value)
    art = t2n.compile(ScatterAdd(), args, t2n.TractNNEF("0.23.0"))
    assert 'reduction = "add"' in art.graph_nnef

    class Scatter(nn.Module):  # a plain scatter (no reduction) is fine everywhere
        def forward(self, x, index):
            return x.scatter(0, index, x)

    t2n.compile(Scatter(), args, t2n.TractNNEF("0.21.19"))


def test_average_pool_counting_padding_gets_an_explicit_pad_on_older_tract():
    pool = nn.AvgPool1d(3, stride=2, padding=1)  # count_include_pad: padding in the divisor
    old = t2n.compile(pool, (torch.randn(1, 2, 11),), t2n.TractNNEF("0.22.4")).graph_nnef
    assert "pad(" in old and "padding = [(0, 0), (0, 0), (0, 0)]" in old
    new = t2n.compile(pool, (torch.randn(1, 2, 11),), t2n.TractNNEF("0.23.9")).graph_nnef
    assert "pad(" not in new and 'border = "constant"' in new
    khronos = t2n.compile(pool, (torch.randn(1, 2, 11),), t2n.KhronosNNEF()).graph_nnef
    assert "pad(" not in khronos  # only tract is gated


class _IntMath(nn.Module):
    def forward(self, i):
        return torch.sign(i), torch.div(i, 4, rounding_mode="trunc"), i // 3


def test_integer_sign_and_division_by_a_constant_get_exact_forms_on_older_tract():
    i = torch.tensor([-7, 7, -8, 3, 0, -1])
    old = t2n.compile(_IntMath(), (i,), t2n.TractNNEF("0.23.0")).graph_nnef
    assert "sign(" not in old and "idiv_mag" in old
    new = t2n.compile(_IntMath(), (i,), t2n.TractNNEF("0.23.9")).graph_nnef
    assert "sign(" in new and "idiv_mag" not in new
    floats = t2n.compile(_IntMath(), (i.float(),), t2n.TractNNEF("0.21.19")).graph_nnef
    assert "sign(" in floats  # the float kernels are fine everywhere


def test_f64_abs_is_spelled_out_for_older_tract():
    class Abs(nn.Module):
        def forward(self, x):
            return x.abs()

    x = torch.randn(4, dtype=torch.float64)
    old = t2n.compile(Abs(), (x,), t2n.TractNNEF("0.22.4")).graph_nnef
    assert "abs(" not in old and "select(" in old
    assert "abs(" in t2n.compile(Abs(), (x,), t2n.TractNNEF("0.23.9")).graph_nnef
    assert "abs(" in t2n.compile(Abs(), (x.float(),), t2n.TractNNEF("0.21.19")).graph_nnef
