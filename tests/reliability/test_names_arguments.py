"""Names and arguments say what they do: every bad name or option of a public entry
point is refused up front with a typed error naming it (or, for names t2n derives, made
valid and reported), and graph.nnef always uses the names the artifact reports."""

import logging
import re

import numpy as np
import pytest
import torch

import t2n
from t2n.errors import DynamicAxesError, InvalidArgumentError
from t2n.passes.dynamic_axes import list_form_symbol


class Add(torch.nn.Module):
    """Two inputs, two outputs, and an intermediate value named ``mul``."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, a, b):
        self.calls += 1
        return a + b, torch.relu(a * b)


class Seq(torch.nn.Module):
    def forward(self, x):
        return x * 2.0


X = torch.rand(2, 3)


def graph_names(art):
    """The (inputs, outputs) of the graph line of graph.nnef."""
    m = re.search(r"^graph \w+\((.*)\) -> \((.*)\)$", art.graph_nnef, re.M)
    assert m, art.graph_nnef
    return [s.strip() for s in m.group(1).split(",")], [s.strip() for s in m.group(2).split(",")]


def assert_truthful(art):
    assert graph_names(art) == (art.input_names, art.output_names)
    assert art.check().ok


# -- 1. input/output names ----------------------------------------------------------------

BAD_NAMES = [
    ("my in", "not an NNEF identifier"),
    ("1a", "not an NNEF identifier"),
    ("é", "not an NNEF identifier"),
    ("a-b", "not an NNEF identifier"),
    ("", "is empty"),
    (1, "not a string"),
    (None, "not a string"),
    (b"a", "not a string"),
    ("graph", "NNEF keyword"),
    ("version", "NNEF keyword"),
    ("fragment", "NNEF keyword"),
    ("true", "NNEF keyword"),
    ("length_of", "NNEF keyword"),
    ("info", "tract reads as a literal"),
    ("inf", "tract reads as a literal"),
    ("true_x", "tract reads as a literal"),
    ("falsey", "tract reads as a literal"),
]


@pytest.mark.parametrize("name, rule", BAD_NAMES)
@pytest.mark.parametrize("what", ["input", "output"])
def test_invalid_names_are_refused_before_tracing(name, rule, what):
    model = Add()
    names = {f"{what}_names": [name, "ok"]}
    with pytest.raises(InvalidArgumentError, match=re.escape(rule)) as info:
        t2n.compile(model, (X, X), **names)
    assert f"{what}_names[0] = {name!r}" in str(info.value)
    assert model.calls == 0  # refused before the trace


@pytest.mark.parametrize("name", ["graph", "tensor", "yield", "if"])
def test_keywords_are_refused_on_khronos(name):
    with pytest.raises(InvalidArgumentError, match="NNEF keyword"):
        t2n.compile(Seq(), (X,), t2n.KhronosNNEF(), input_names=[name])


def test_tract_literal_starts_are_fine_on_khronos():
    art = t2n.compile(Seq(), (X,), t2n.KhronosNNEF(), input_names=["info"], output_names=["true_x"])
    assert_truthful(art)


@pytest.mark.parametrize("kwargs, message", [
    ({"input_names": ["a", "a"]}, "'a' is given twice"),
    ({"output_names": ["o", "o"]}, "'o' is given twice"),
    ({"input_names": ["a", "b"], "output_names": ["a", "c"]}, "output name 'a' is also an input name"),
    ({"output_names": ["input_1", "c"]}, "output name 'input_1' is also an input name"),
    ({"input_names": ["a"]}, "1 input names given but the model has 2"),
    ({"output_names": ["a", "b", "c"]}, "3 output names given but the model has 2"),
    ({"input_names": "ab"}, "input_names must be a list of strings"),
    ({"output_names": {"a": 1}}, "output_names must be a list of strings"),
])
def test_name_lists_that_cannot_hold(kwargs, message):
    with pytest.raises(InvalidArgumentError, match=re.escape(message)):
        t2n.compile(Add(), (X, X), **kwargs)


def test_names_equal_to_a_symbol_are_refused():
    with pytest.raises(DynamicAxesError, match="symbol 'S' is also the name of an input or output"):
        t2n.compile(Seq(), (X,), input_names=["x"], output_names=["S"], dynamic_axes={"x": {1: "S"}})


def test_output_named_like_an_intermediate_keeps_its_name():
    # `mul` is the name t2n gives the product inside the graph: the output still gets it
    art = t2n.compile(Add(), (X, X), input_names=["a", "b"], output_names=["add", "mul"])
    assert art.output_names == ["add", "mul"]
    assert_truthful(art)
    assert "mul = relu(" in art.graph_nnef


@pytest.mark.parametrize("target", [t2n.TractNNEF(), t2n.KhronosNNEF()], ids=["tract", "khronos"])
def test_names_of_weights_ops_and_the_graph_stay_apart(target):
    # "bias"/"weight" are the names t2n gives the Linear's variables, "main" the graph's,
    # "matmul" an intermediate's: user names win, the internal ones move aside
    art = t2n.compile(torch.nn.Linear(3, 2), (torch.rand(1, 3),), target,
                      input_names=["bias"], output_names=["weight"])
    assert_truthful(art)
    art = t2n.compile(torch.nn.Linear(3, 2), (torch.rand(1, 3),), target,
                      input_names=["main"], output_names=["matmul"])
    assert_truthful(art)


def test_unusual_but_valid_names_are_kept_exactly():
    art = t2n.compile(Add(), (X, X), input_names=["_x", "x_"], output_names=["nan", "extent"])
    assert art.input_names == ["_x", "x_"]
    assert_truthful(art)


class Identity(torch.nn.Module):
    def forward(self, x):
        return x


class Twice(torch.nn.Module):
    def forward(self, x):
        return x, x


@pytest.mark.parametrize("target", [t2n.TractNNEF(), t2n.KhronosNNEF()], ids=["tract", "khronos"])
def test_an_output_that_is_an_input_is_a_named_copy(target):
    art = t2n.compile(Identity(), (X,), target, input_names=["x"], output_names=["y"])
    assert "y = copy(x);" in art.graph_nnef
    assert_truthful(art)
    art = t2n.compile(Twice(), (X,), target)
    assert art.output_names == ["output_0", "output_1"]
    assert_truthful(art)


class EveryKind(torch.nn.Module):
    """Outputs of every kind: a computed value twice, constants, a parameter, an input."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.rand(2))

    def forward(self, x):
        y = x * 2
        return y, y, torch.ones(2) * 3, self.w, x, torch.zeros(()) + 1


@pytest.mark.parametrize("target", [t2n.TractNNEF(), t2n.KhronosNNEF()], ids=["tract", "khronos"])
@pytest.mark.parametrize("names", [None, list("abcdef")])
def test_outputs_of_every_kind_carry_the_reported_names(target, names):
    art = t2n.compile(EveryKind(), (torch.rand(2),), target, output_names=names)
    assert art.output_names == (names or [f"output_{i}" for i in range(6)])
    assert_truthful(art)


class Keyed(torch.nn.Module):
    def forward(self, x, info=None):
        return {"graph": x + 1, "my key": x * 2, "x": x - 1, "info": info * 3}


def test_derived_names_are_made_valid_reported_and_logged(caplog):
    with caplog.at_level(logging.WARNING, logger="t2n"):
        art = t2n.compile(Keyed(), (X,), kwargs={"info": X})
    assert art.input_names == ["input_0", "_info"]
    assert art.output_names == ["graph_", "my_key", "x", "_info_1"]
    assert_truthful(art)
    logged = caplog.text
    for original, final in [("graph", "graph_"), ("my key", "my_key"), ("info", "_info_1")]:
        assert f"{original!r} is named {final!r}" in logged


def test_derived_output_beside_an_input_of_that_name_gets_a_suffix():
    class Echo(torch.nn.Module):
        def forward(self, x, *, extra):
            return {"extra": extra.mean(dim=-1)}

    art = t2n.compile(Echo(), (X,), kwargs={"extra": X})
    assert art.input_names == ["input_0", "extra"] and art.output_names == ["extra_1"]
    assert_truthful(art)


# -- 2. target versions --------------------------------------------------------------------

@pytest.mark.parametrize("make, message", [
    (lambda: t2n.TractNNEF(0.21), "must be a string"),
    (lambda: t2n.TractNNEF(0.2), "0.20 and 0.2 are the same float"),
    (lambda: t2n.TractNNEF(21), "must be a string"),
    (lambda: t2n.TractNNEF("0.21.x"), "cannot read TractNNEF version '0.21.x'"),
    (lambda: t2n.TractNNEF("0.23.9abc"), "cannot read TractNNEF version"),
    (lambda: t2n.TractNNEF(""), "cannot read TractNNEF version ''"),
    (lambda: t2n.TractNNEF("-0.21"), "non-negative"),
    (lambda: t2n.TractNNEF("0.-1.0"), "non-negative"),
    (lambda: t2n.TractNNEF("latest"), "cannot read"),
    (lambda: t2n.TractNNEF("0.18.3"), "tract 0.19 and newer"),
    (lambda: t2n.KhronosNNEF("1.0"), "supports NNEF 1.0.5"),
    (lambda: t2n.KhronosNNEF("1.0.3"), "supports NNEF 1.0.5"),
    (lambda: t2n.KhronosNNEF("2.0"), "supports NNEF 1.0.5"),
    (lambda: t2n.KhronosNNEF(1.0), "must be a string"),
    (lambda: t2n.TractNNEF(bf16_as="bf16"), "f16 or f32"),
])
def test_bad_target_versions(make, message):
    with pytest.raises(InvalidArgumentError, match=re.escape(message)):
        make()


def test_good_versions_are_read():
    assert t2n.TractNNEF("0.21").version_tuple == (0, 21, 0)
    assert t2n.TractNNEF(" v0.22.1 ").version_tuple == (0, 22, 1)
    assert t2n.KhronosNNEF("1.0.5").version_tuple == (1, 0, 5)


@pytest.mark.parametrize("target", ["tract", None.__class__, 0.23])
def test_target_of_the_wrong_kind(target):
    with pytest.raises(InvalidArgumentError, match="target must be"):
        t2n.compile(Seq(), (X,), target)


# -- 2. options of compile, all checked before the trace -----------------------------------

@pytest.mark.parametrize("kwargs, error, message", [
    ({"tolerance": "approx"}, InvalidArgumentError, "tolerance must be"),
    ({"tolerance": "approx", "check_io": True}, InvalidArgumentError, "'approximate'"),
    ({"tolerance": 1e-3}, InvalidArgumentError, "tolerance must be"),
    ({"log_level": "verbose"}, InvalidArgumentError, "log_level must be"),
    ({"log_level": True}, InvalidArgumentError, "log_level must be"),
    ({"log_level": -5}, InvalidArgumentError, "log_level must be"),
    ({"passes": t2n.PassManager}, InvalidArgumentError, "passes must be a pipeline string"),
    ({"passes": "default,+dead-node-eliminaton"}, InvalidArgumentError, "no pass is called 'dead-node-eliminaton'"),
    ({"passes": ["default", 3]}, InvalidArgumentError, "passes[1] = 3 is a int"),
    ({"dynamic_axes": {"input_0": {"1": "S"}}}, DynamicAxesError, "axis '1' is not an int; write it as the integer 1"),
    ({"dynamic_axes": {"input_0": {True: "S"}}}, DynamicAxesError, "axis True is not an int"),
    ({"dynamic_axes": {"input_0": {1.0: "S"}}}, DynamicAxesError, "axis 1.0 is not an int"),
    ({"dynamic_axes": {"input_0": {1: "1S"}}}, DynamicAxesError, "not a symbol name"),
    ({"dynamic_axes": {"input_0": {1: "graph"}}}, DynamicAxesError, "NNEF keyword"),
    ({"dynamic_axes": {"input_0": {1: "S T"}}}, DynamicAxesError, "not a symbol name"),
    ({"dynamic_axes": {"input_0": {1: "inf"}}}, DynamicAxesError, "reads as a literal"),
    ({"dynamic_axes": {"input_0": {1: 5}}}, DynamicAxesError, "not a string"),
    ({"dynamic_axes": {"input_0": ["1"]}}, DynamicAxesError, "axis '1' is not an int"),
    ({"dynamic_axes": {"input_0": 1}}, DynamicAxesError, "must map axis"),
    ({"dynamic_axes": [("input_0", 1)]}, DynamicAxesError, "must be a dict"),
    ({"dynamic_axes": {0: {1: "S"}}}, DynamicAxesError, "keys are input names"),
    ({"check_io": "no"}, InvalidArgumentError, "check_io must be True or False"),
    ({"fold_batch_norm": "false"}, InvalidArgumentError, "fold_batch_norm must be True or False"),
    ({"verify_ir": 1}, InvalidArgumentError, "verify_ir must be True or False"),
    ({"strict_dynamic_axes": None}, InvalidArgumentError, "strict_dynamic_axes must be True or False"),
    ({"kwargs": [X]}, InvalidArgumentError, "kwargs must be a dict"),
    ({"custom_extensions": "tract_assert S >= 1"}, InvalidArgumentError, "must be a list of strings"),
    ({"custom_extensions": [42]}, InvalidArgumentError, "custom_extensions[0] is a int"),
    ({"custom_extensions": ["tract_assert S >= 1; x = external<scalar>(shape = [1])"]},
     InvalidArgumentError, "';' inside the line"),
    ({"custom_extensions": ["tract_assert S >= 1\ngraph evil() -> () {}"]}, InvalidArgumentError, "line break"),
    ({"custom_extensions": ["tract_assert S >= 1 # why"]}, InvalidArgumentError, "'#'"),
    ({"custom_extensions": ["tract_assert S >="]}, InvalidArgumentError, "empty"),
    ({"custom_extensions": ["tract_assert S >= 1 && S <= 5"]}, InvalidArgumentError, "one comparison"),
    ({"custom_extensions": ["tract_assert S >= (1"]}, InvalidArgumentError, "not a complete expression"),
    ({"custom_extensions": ["tract_assert S ** 2 >= 1"]}, InvalidArgumentError, "not a complete expression"),
    ({"custom_extensions": ["tract_assert"]}, InvalidArgumentError, "one comparison"),
    ({"custom_extensions": ["tract_symbol 1S"]}, InvalidArgumentError, "symbol '1S'"),
    ({"custom_extensions": ["tract_symbol"]}, InvalidArgumentError, "names no symbol"),
    ({"custom_extensions": ["tract_registry tract_extra"]}, InvalidArgumentError, "registries are added by t2n"),
    ({"custom_extensions": ["1abc"]}, InvalidArgumentError, "does not start with an extension name"),
    ({"custom_extensions": [""]}, InvalidArgumentError, "does not start with an extension name"),
])
def test_bad_options_are_refused_before_tracing(kwargs, error, message):
    model = Add()
    with pytest.raises(error, match=re.escape(message)):
        t2n.compile(model, (X, X), **kwargs)
    assert model.calls == 0


def test_khronos_refuses_dynamic_axes_and_extensions_before_tracing():
    model = Add()
    with pytest.raises(DynamicAxesError, match="no symbolic dimensions"):
        t2n.compile(model, (X, X), t2n.KhronosNNEF(), dynamic_axes={"input_0": {0: "B"}})
    with pytest.raises(InvalidArgumentError, match="Khronos NNEF has no custom extensions"):
        t2n.compile(model, (X, X), t2n.KhronosNNEF(), custom_extensions=["tract_assert B >= 1"])
    assert model.calls == 0


def test_axes_of_the_target_and_the_call_that_disagree_are_refused_before_tracing_or_writing(tmp_path):
    model, target = Add(), t2n.TractNNEF(dynamic_axes={"input_0": {0: "B"}})
    message = "input 'input_0' axis 0: symbol 'B' on the target but 'N' in compile()"
    with pytest.raises(DynamicAxesError, match=re.escape(message)):
        t2n.compile(model, (X, X), target, dynamic_axes={"input_0": {0: "N"}})
    with pytest.raises(DynamicAxesError, match=re.escape(message)):
        t2n.export(model, (X, X), tmp_path / "m.tar", target, dynamic_axes={"input_0": {0: "N"}})
    assert model.calls == 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("axes, message", [
    ({"nope": {0: "S"}}, "inputs are: input_0, input_1"),
    ({"input_0": {2: "S"}}, "axis 2 is out of range for a rank-2 input"),
    ({"input_0": [-3]}, "axis -3 is out of range"),
    ({"input_0": {1: "S", -1: "T"}}, "axis 1 is given twice"),
])
def test_dynamic_axes_checked_against_the_model(axes, message):
    with pytest.raises(DynamicAxesError, match=re.escape(message)):
        t2n.compile(Add(), (X, X), dynamic_axes=axes)


@pytest.mark.parametrize("make, message", [
    (lambda: t2n.TractNNEF(dynamic_axes={"x": {"1": "S"}}), "TractNNEF(dynamic_axes=...)['x']: axis '1'"),
    (lambda: t2n.TractNNEF(dynamic_axes={"x": {1: "for"}}), "NNEF keyword"),
    (lambda: t2n.TractNNEF(custom_extensions=["a; b"]), "TractNNEF(custom_extensions=...)[0]"),
    (lambda: t2n.TractNNEF(custom_extensions="tract_symbol S"), "must be a list of strings"),
])
def test_target_options_are_checked_like_compile_options(make, message):
    with pytest.raises((InvalidArgumentError, DynamicAxesError), match=re.escape(message)):
        make()


def test_list_form_dynamic_axes_generate_documented_symbols():
    art = t2n.compile(Seq(), (torch.rand(2, 3),), input_names=["x"], dynamic_axes={"x": [0, -1]})
    assert list_form_symbol("x", 0) == "x_dim0" and list_form_symbol("x", -1) == "x_dim_minus1"
    assert "extension tract_symbol x_dim0;" in art.graph_nnef
    assert "extension tract_symbol x_dim_minus1;" in art.graph_nnef
    assert "shape = [x_dim0, x_dim_minus1]" in art.graph_nnef
    x = np.random.rand(4, 5).astype(np.float32)
    assert art.check(inputs=[x], expected=[x * 2.0]).ok


def test_options_in_any_case_and_valid_extensions_work():
    art = t2n.compile(Seq(), (X,), tolerance="LOOSE", log_level="warning", check_io=True,
                      dynamic_axes={"input_0": {0: "B"}},
                      custom_extensions=["extension tract_assert B <= 64;", "tract_assert train: B >= 2"])
    assert "extension tract_assert B <= 64;" in art.graph_nnef
    assert "extension tract_assert train: B >= 2;" in art.graph_nnef
    assert art.check("very_loose").ok


# -- 2. save, export and check ----------------------------------------------------------------

@pytest.fixture(scope="module")
def artifact():
    return t2n.compile(Add(), (X, X))


@pytest.mark.parametrize("name", ["model.zip", "model.onnx", "model.nnef.gz", "model.tar.bz2",
                                  "model.tar.xz", "model.pt", "model.TAR"])
def test_unknown_suffixes_are_refused_and_nothing_is_written(artifact, tmp_path, name):
    with pytest.raises(InvalidArgumentError, match=r"directory has no suffix or ends in '\.nnef'.*'\.tar'.*'\.tgz'"):
        artifact.save(tmp_path / name)
    with pytest.raises(InvalidArgumentError, match=re.escape(name)):
        t2n.export(Add(), (X, X), tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_suffix_with_an_explicit_level_is_an_archive(artifact, tmp_path):
    path = artifact.save(tmp_path / "model.zip", compression_level=6)
    assert path.is_file() and path.read_bytes()[:2] == b"\x1f\x8b"
    assert artifact.save(tmp_path / "model.nnef").is_dir()
    assert artifact.save(tmp_path / "resnet-1.5").is_dir()


@pytest.mark.parametrize("level", ["6", 6.0, True, -1, 10, None.__class__])
def test_compression_level_of_the_wrong_type(artifact, tmp_path, level):
    with pytest.raises(InvalidArgumentError, match="compression_level must be"):
        artifact.save(tmp_path / "m.tgz", compression_level=level)
    with pytest.raises(InvalidArgumentError, match="compression_level must be"):
        t2n.export(Add(), (X, X), tmp_path / "m.tgz", compression_level=level)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kwargs, message", [
    ({"input_name": ["x", "y"]}, "unknown option(s) 'input_name'"),
    ({"tolerance": "closest"}, "tolerance must be"),
    ({"input_names": ["graph", "b"]}, "input_names[0] = 'graph'"),
    ({"dynamic_axes": {"input_0": {"0": "B"}}}, "axis '0' is not an int"),
    ({"custom_extensions": ["x;y"]}, "';' inside"),
    ({"log_level": "loud"}, "log_level must be"),
    ({"overlap": "yes"}, "overlap must be True or False"),
    ({"sync": 0}, "sync must be True or False"),
    ({"progress": "auto"}, "progress must be None, True or False"),
])
def test_export_checks_options_before_touching_the_destination(tmp_path, kwargs, message):
    model = Add()
    with pytest.raises((InvalidArgumentError, DynamicAxesError), match=re.escape(message)):
        t2n.export(model, (X, X), tmp_path / "m.tar", **kwargs)
    assert model.calls == 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kwargs, message", [
    ({"inputs": [], "expected": []}, "inputs has 0 arrays but the model has 2 inputs (input_0, input_1)"),
    ({"inputs": [X.numpy(), X.numpy()], "expected": []}, "expected has 0 arrays but the model has 2 outputs"),
    ({"inputs": [X.numpy()] * 3, "expected": [X.numpy()] * 2}, "inputs has 3 arrays"),
    ({"inputs": X.numpy(), "expected": [X.numpy()] * 2}, "inputs must be a list of arrays"),
    ({"inputs": [X.numpy()] * 2}, "give both inputs and expected"),
    ({"tolerance": "tight"}, "tolerance must be"),
])
def test_check_arguments(artifact, kwargs, message):
    with pytest.raises(InvalidArgumentError, match=re.escape(message)):
        artifact.check(**kwargs)


@pytest.mark.parametrize("kwargs, message", [
    ({"name_to_tensor": [torch.rand(2)]}, "name_to_tensor must be a mapping"),
    ({"name_to_tensor": {1: torch.rand(2)}}, "keys must be strings"),
    ({"bf16_as": "f8"}, "bf16_as must be 'f16' or 'f32'"),
    ({"progress": "yes"}, "progress must be None, True or False"),
    ({"sync": 1}, "sync must be True or False"),
])
def test_tensor_export_arguments(tmp_path, kwargs, message):
    args = {"name_to_tensor": {"a": torch.rand(2)}, **kwargs}
    with pytest.raises(InvalidArgumentError, match=re.escape(message)):
        t2n.export_tensors_to_nnef(args.pop("name_to_tensor"), tmp_path / "out", **args)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kwargs, message", [
    ({"filter_key": "encoder"}, "filter_key must be a function"),
    ({"bf16_as": "int8"}, "bf16_as must be"),
    ({"sync": "no"}, "sync must be"),
])
def test_tensor_export_from_disk_arguments(tmp_path, kwargs, message):
    from safetensors.torch import save_file

    src = tmp_path / "w.safetensors"
    save_file({"a": torch.rand(2)}, src)
    with pytest.raises(InvalidArgumentError, match=re.escape(message)):
        t2n.export_tensors_from_disk_to_nnef(src, tmp_path / "out", **kwargs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.safetensors"]


@pytest.mark.parametrize("path", [None, 3, ["m.tar"]])
def test_export_path_of_the_wrong_type(path):
    model = Add()
    with pytest.raises(InvalidArgumentError, match="path must be a str or a path"):
        t2n.export(model, (X, X), path)
    assert model.calls == 0
