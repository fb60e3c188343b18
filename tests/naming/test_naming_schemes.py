"""Naming schemes: every scheme gives valid, unique identifiers that tract and the
Khronos parser read, the same bytes at every export, .dat labels that keep the
parameters' names, and the same numbers.

Bad inputs tried here (6): scheme names that are not schemes ("Natural_Verbose",
"numbers", "", None, 3) through compile, and one through export (nothing written).
Module and parameter names that are not usable as they are (a module called
``inference``, whose names start like tract's ``inf`` literal; one called ``graph``, an
NNEF keyword; a parameter ``true_scale``) are made valid, never refused.
"""

import re

import pytest
import torch

import t2n
from t2n.backends.nnef.naming import NAMING_SCHEMES, camel
from t2n.errors import InvalidArgumentError
from t2n.ir.identifiers import STANDARD_IDENTIFIERS, TRACT_IDENTIFIERS

X = torch.rand(2, 4)


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x))) + x


class Net(torch.nn.Module):
    """Nested modules, a repeated block, and names that are awkward identifiers."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = torch.nn.Sequential(Block(), Block())
        self.inference = torch.nn.Linear(4, 4)
        self.graph = torch.nn.LayerNorm(4)
        self.true_scale = torch.nn.Parameter(torch.rand(4))
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.graph(self.inference(self.encoder(x))) * self.true_scale


PARAMS = [name for name, _ in Net().named_parameters()]
_ASSIGNED = re.compile(r"^\s+([A-Za-z_][A-Za-z0-9_]*) = ", re.M)


def _body(text):
    return text[text.index("\ngraph "):]


def _defined(text):
    return _ASSIGNED.findall(_body(text))


@pytest.fixture(scope="module")
def tract_artifacts():
    model = Net()
    return {s: t2n.compile(model, (X,), nnef_variable_naming_scheme=s) for s in NAMING_SCHEMES}


@pytest.mark.parametrize("scheme", NAMING_SCHEMES)
def test_identifiers_are_valid_unique_and_run_in_tract(tract_artifacts, scheme):
    art = tract_artifacts[scheme]
    names = _defined(art.graph_nnef)
    assert len(names) == len(set(names)), "an identifier is assigned twice"
    assert [n for n in names if TRACT_IDENTIFIERS.problem(n)] == []
    assert art.input_names == ["input_0"] and art.output_names == ["output_0"]
    assert art.check(t2n.Tolerance.APPROXIMATE).ok


@pytest.mark.parametrize("scheme", NAMING_SCHEMES)
def test_khronos_parser_reads_every_scheme(scheme):
    art = t2n.compile(Net(), (X,), t2n.KhronosNNEF(), nnef_variable_naming_scheme=scheme)
    names = _defined(art.graph_nnef)
    assert len(names) == len(set(names))
    assert [n for n in names if STANDARD_IDENTIFIERS.problem(n)] == []
    assert art.check().ok  # the Khronos parser, then the nnef-tools interpreter


@pytest.mark.parametrize("scheme", NAMING_SCHEMES)
def test_reexport_is_byte_identical_and_labels_keep_parameter_names(tract_artifacts, scheme, tmp_path):
    torch.manual_seed(1)
    model = Net()
    first = t2n.export(model, (X,), tmp_path / "a.nnef", nnef_variable_naming_scheme=scheme)
    second = t2n.export(model, (X,), tmp_path / "b.nnef", nnef_variable_naming_scheme=scheme)
    assert (tmp_path / "a.nnef" / "graph.nnef").read_bytes() == (tmp_path / "b.nnef" / "graph.nnef").read_bytes()
    assert first.graph_nnef == second.graph_nnef
    labels = re.findall(r'label = "([^"]+)"', first.graph_nnef)
    params = [p for p in PARAMS if p in labels]
    assert sorted(params) == sorted(PARAMS), "every parameter keeps its dotted name as its .dat label"
    for p in PARAMS:
        assert (tmp_path / "a.nnef" / f"{p}.dat").is_file()


def test_natural_verbose_is_the_default_and_names_the_module(tract_artifacts):
    default = t2n.compile(Net(), (X,))
    assert default.graph_nnef == tract_artifacts["natural_verbose"].graph_nnef
    names = _defined(default.graph_nnef)
    assert "encoder_0_fc1_matmul" in names and "encoder_1_fc2_matmul" in names
    assert "encoder_0_fc1_weight" in names
    # a module called 'inference' would start with tract's 'inf' literal: moved aside
    assert "_inference_matmul" in names and not any(n.startswith("inf") for n in names)
    assert "graph_mean_reduce" in names and "graph_rms_norm" in names  # the norm's ops, by its module
    assert "encoder_0_add" in names and "encoder_1_add" in names  # counted per module
    assert "_true_scale" in names


def test_the_enum_names_the_same_schemes(tract_artifacts):
    art = t2n.compile(Net(), (X,), nnef_variable_naming_scheme=t2n.VariableNamingScheme.NUMERIC)
    assert _defined(art.graph_nnef) == _defined(tract_artifacts["numeric"].graph_nnef)
    assert [s.value for s in t2n.VariableNamingScheme] == list(NAMING_SCHEMES)


def test_camel_uses_the_same_words(tract_artifacts):
    names = _defined(tract_artifacts["natural_verbose_camel"].graph_nnef)
    assert "encoder0Fc1Matmul" in names and "encoder0Fc1Weight" in names
    assert camel("encoder_0_fc1_matmul") == "encoder0Fc1Matmul" and camel("x") == "x"


def test_numeric_names_are_short(tract_artifacts):
    art = tract_artifacts["numeric"]
    names = [n for n in _defined(art.graph_nnef) if n not in art.input_names + art.output_names]
    assert names and all(re.fullmatch(r"v\d+", n) for n in names)


def test_raw_uses_the_trace_names(tract_artifacts):
    art = tract_artifacts["raw"]
    traced = {re.sub(r"[^A-Za-z0-9_]", "_", n) for n in art.ir.info.traced_names.values()}
    names = set(_defined(art.graph_nnef))
    assert art.graph_nnef != tract_artifacts["natural_verbose"].graph_nnef
    assert any(n in names or f"v{n}" in names for n in traced)


def test_every_scheme_gives_the_same_numbers(tract_artifacts):
    base = tract_artifacts["natural_verbose"]
    for scheme in NAMING_SCHEMES:
        art = tract_artifacts[scheme]
        report = art.check(inputs=base.example_inputs, expected=base.reference_outputs)
        assert report.ok, scheme


@pytest.mark.parametrize("bad", ["Natural_Verbose", "numbers", "", None, 3])
def test_unknown_schemes_are_refused_before_the_trace(bad):
    model = Net()
    with pytest.raises(InvalidArgumentError) as info:
        t2n.compile(model, (X,), nnef_variable_naming_scheme=bad)
    msg = str(info.value)
    assert "nnef_variable_naming_scheme" in msg and repr(bad) in msg
    assert all(s in msg for s in NAMING_SCHEMES)
    assert model.calls == 0


def test_export_refuses_an_unknown_scheme_and_writes_nothing(tmp_path):
    with pytest.raises(InvalidArgumentError, match="nnef_variable_naming_scheme"):
        t2n.export(Net(), (X,), tmp_path / "m.nnef.tgz", nnef_variable_naming_scheme="short")
    assert list(tmp_path.iterdir()) == []


_EXPORT_IN_A_PROCESS = """
import sys, torch, t2n
sys.path.insert(0, {tests!r})
from test_naming_schemes import Net, X
torch.manual_seed(0)
for scheme in t2n.VariableNamingScheme:
    t2n.export(Net(), (X,), {out!r} + "/" + scheme.value + ".nnef", nnef_variable_naming_scheme=scheme)
"""


@pytest.mark.slow
def test_graphs_are_byte_identical_across_processes(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(t2n.__file__).resolve().parents[1]
    outs = []
    for seed in ("1", "2"):
        out = tmp_path / seed
        out.mkdir()
        code = _EXPORT_IN_A_PROCESS.format(tests=str(Path(__file__).parent), out=str(out))
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(repo)}
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        outs.append(out)
    for scheme in NAMING_SCHEMES:
        first, second = (o / f"{scheme}.nnef" / "graph.nnef" for o in outs)
        assert first.read_bytes() == second.read_bytes(), scheme


def test_a_taken_name_gets_the_first_free_numbered_suffix():
    """The one uniqueness rule behind made-up identifiers, tensor file labels and symbol
    names: the name itself, else ``_1``, ``_2``… after it."""
    from t2n.ir.identifiers import free_name

    assert free_name("x", set().__contains__) == "x"
    assert free_name("x", {"x", "x_1", "x_3"}.__contains__) == "x_2"
    assert TRACT_IDENTIFIERS.make("inf", fallback="v", taken={"_inf"}.__contains__) == "_inf_1"
