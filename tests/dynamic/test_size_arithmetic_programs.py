"""Random programs of size arithmetic over a symbolic axis, run in tract at several
lengths against PyTorch.

Each program takes ``x`` of shape ``[2, S, 3]`` (``S`` a dynamic axis) and chains a few
steps that compute sizes from the current length ``n``: slices with bounds computed from
``n`` or constant (negative, or past the end: PyTorch clamps), ``narrow``, tensors from
``torch.full``/``zeros``/``ones`` sized from ``n`` (concatenated or added), ``expand`` and
``repeat`` to computed sizes, causal masks and relative positions built by hand. The
artifact is compiled once, at the first length, and must give PyTorch's numbers at every
length, the traced one included, with the symbol kept (no size baked in). With the
``export`` frontend torch.export may refuse a program (it guards sizes it cannot prove):
that must be a typed error raised before anything is written, never a wrong artifact.

A second family turns sizes into Python values (``min(n, 4)``, ``math.ceil(n / 3)``,
``if n > 4``): the trace keeps the traced value, so those exports must warn
(``BakedSizeWarning``) or, strictly, refuse; never stay silent.
"""

import math
import warnings

import pytest
import torch
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

import t2n
from t2n.errors import CheckError, DynamicAxesError, T2NError
from t2n.passes.dynamic_axes import BakedSizeWarning
from t2n.testing import check_dynamic

LENGTHS = (7, 1, 2, 5, 12)
"""The traced length first, then lengths below and above it (1 included)."""

BOUNDS = {
    "none": lambda n: None, "0": lambda n: 0, "1": lambda n: 1, "2": lambda n: 2, "3": lambda n: 3,
    "-1": lambda n: -1, "-2": lambda n: -2, "-3": lambda n: -3, "-5": lambda n: -5,
    "1000": lambda n: 1000, "-1000": lambda n: -1000,
    "n//2": lambda n: n // 2, "n//3": lambda n: n // 3, "(n+1)//2": lambda n: (n + 1) // 2,
    "2*n//3": lambda n: 2 * n // 3, "n-n//4": lambda n: n - n // 4, "n": lambda n: n,
}
"""Slice bounds: constants of every kind, and sizes computed from the length ``n``."""


def _slice(b, e):
    def step(x):
        n = x.shape[1]
        return x[:, BOUNDS[b](n): BOUNDS[e](n)]

    return f"x[:, {b}:{e}]", step


def _narrow(k):
    return f"narrow(1, 0, n // {k} + 1)", lambda x: x.narrow(1, 0, x.shape[1] // k + 1)


def _full_cat(k, value):
    return (f"cat(x, full(n // {k} + 1, {value}))",
            lambda x: torch.cat([x, torch.full((2, x.shape[1] // k + 1, 3), value)], 1))


def _filled_add(kind):
    make = {"zeros": torch.zeros, "ones": torch.ones}[kind]
    return f"x + {kind}(2, n, 3)", lambda x: x + make(2, x.shape[1], 3)


def _expand(k):
    return f"x[:, :1].expand(2, n * {k}, 3)", lambda x: x[:, :1].expand(2, x.shape[1] * k, 3)


def _expand_mean(k):
    return (f"mean.expand(-1, n + {k}, -1)",
            lambda x: x.mean(1, keepdim=True).expand(-1, x.shape[1] + k, -1))


def _repeat(k):
    return f"repeat(1, {k}, 1)", lambda x: x.repeat(1, k, 1)


def _causal():
    def step(x):
        n = x.shape[1]
        mask = torch.full((n, n), float("-inf")).triu(1)
        w = (x[0] @ x[0].T / 3 + mask).softmax(-1)
        return (w @ x[0]).unsqueeze(0).expand(2, -1, -1)

    return "causal attention (full().triu)", step


def _relative_positions():
    def step(x):
        n = x.shape[1]
        rel = (torch.arange(n)[None, :] - torch.arange(n)[:, None]).clamp(-2, 2).float()
        return x + (rel @ x[0] * 0.1).unsqueeze(0)

    return "relative positions (arange(n) - arange(n))", step


def _ones_mask():
    return "x * ones(n, 3).tril()", lambda x: x * torch.ones(x.shape[1], 3).tril()


STEPS = st.one_of(
    st.builds(_slice, st.sampled_from(sorted(BOUNDS)), st.sampled_from(sorted(BOUNDS))),
    st.builds(_narrow, st.integers(1, 3)),
    st.builds(_full_cat, st.integers(1, 3), st.sampled_from([1.5, -2.0])),
    st.builds(_filled_add, st.sampled_from(["zeros", "ones"])),
    st.builds(_expand, st.integers(1, 3)),
    st.builds(_expand_mean, st.integers(0, 2)),
    st.builds(_repeat, st.integers(1, 2)),
    st.builds(_causal),
    st.builds(_relative_positions),
    st.builds(_ones_mask),
)


class Program(torch.nn.Module):
    def __init__(self, steps):
        super().__init__()
        self.steps = [fn for _, fn in steps]
        self.text = " | ".join(name for name, _ in steps)

    def forward(self, x):
        for step in self.steps:
            x = step(x)
        return x * 2

    def __repr__(self):
        return f"Program({self.text})"


def _defined_everywhere(model):
    """PyTorch runs it at every length without an empty tensor on the way."""
    for n in LENGTHS:
        x = torch.randn(2, n, 3)
        try:
            for step in model.steps:
                x = step(x)
                if x.numel() == 0:
                    return False
        except RuntimeError:
            return False
    return True


def _run(model, frontend):
    sizes = [{"S": n} for n in LENGTHS]
    if frontend == "export":
        try:
            check_dynamic(model, lambda S: (torch.randn(2, S, 3),), {"input_0": {1: "S"}}, sizes)
        except T2NError as exc:
            # a refusal by the compile, before anything is written; an artifact that
            # tract refuses to run, or runs wrong, would be a CheckError
            assert not isinstance(exc, CheckError), exc
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error", BakedSizeWarning)  # nothing baked: the symbol is kept
        check_dynamic(model, lambda S: (torch.randn(2, S, 3),), {"input_0": {1: "S"}}, sizes)


@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.lists(STEPS, min_size=1, max_size=3))
@example([_slice("-3", "none")])
@example([_slice("0", "1000"), _slice("2", "none")])
@example([_slice("n//2", "none"), _slice("none", "(n+1)//2")])
@example([_full_cat(2, 1.5), _causal()])
@example([_expand(2), _repeat(2)])
@example([_relative_positions(), _slice("-1000", "-1")])
def test_size_arithmetic_programs_run_at_every_length(t2n_frontend, steps):
    model = Program(steps).eval()
    assume(_defined_everywhere(model))
    _run(model, t2n_frontend)


SPECIALISING = {
    "min(n, 4)": lambda x: x[:, : min(x.shape[1], 4)],
    "math.ceil(n / 3)": lambda x: x[:, : math.ceil(x.shape[1] / 3)],
    "if n > 4": lambda x: x * 2 if x.shape[1] > 4 else x - 1,
    "int(n) * 2": lambda x: x.reshape(2, int(x.shape[1]) * 3),
    "range(n)": lambda x: torch.stack([x[:, i] for i in range(x.shape[1])], 1),
}


@pytest.mark.parametrize("name", sorted(SPECIALISING))
def test_a_size_turned_into_a_python_value_is_never_silent(name):
    """The trace keeps the traced value: a warning naming the line, or an error when
    strict (torch.export guards such sizes instead)."""
    model = Program([(name, SPECIALISING[name])]).eval()
    x = torch.randn(2, LENGTHS[0], 3)
    with pytest.warns(BakedSizeWarning, match="axis 1 \\(symbol S\\)"):
        t2n.compile(model, (x,), dynamic_axes={"input_0": {1: "S"}})
    with pytest.raises(DynamicAxesError, match="Python value"):
        t2n.compile(model, (x,), dynamic_axes={"input_0": {1: "S"}}, strict_dynamic_axes=True)


def test_clamped_bounds_are_written_as_tract_reads_them():
    """``x[:, -3:]`` and ``x[:, :1000]`` on a symbolic axis: max/min in the slice bounds."""
    model = Program([_slice("-3", "1000")]).eval()
    art = t2n.compile(model, (torch.randn(2, 7, 3),), dynamic_axes={"input_0": {1: "S"}})
    assert "begin = [max(0, S - 3)]" in art.graph_nnef and "min(1000, S)" in art.graph_nnef
    for n in (1, 2, 5, 1200):
        xn = torch.randn(2, n, 3)
        assert art.check(inputs=[xn.numpy()], expected=[model(xn).numpy()]).ok


def test_expand_to_a_computed_size_is_a_broadcast_not_a_copy():
    """``expand(2, n * 2)`` of a length-S axis traced at S = 1: the output follows the
    target size; at S > 1 PyTorch itself refuses, and the export says the size was
    specialised."""
    model = Program([("expand", lambda x: x[:, :, 0].expand(2, x.shape[1] * 2))]).eval()
    with pytest.warns(BakedSizeWarning, match="expand"):
        art = t2n.compile(model, (torch.randn(2, 1, 3),), dynamic_axes={"input_0": {1: "S"}})
    assert "2 * S" in str(art.ir.outputs[0].type.shape)
    assert "tract_core_broadcast" in art.graph_nnef
    assert art.check().ok
