"""``t2n export``: a factory or TorchScript file to an artifact, then run in the real
engine through ``t2n check`` against PyTorch's outputs saved here; bad specs and
options fail with a message that names them, before anything is written."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from .cli_support import Run, make_runner


def _factory_model(factories: Path) -> torch.nn.Module:
    spec = importlib.util.spec_from_file_location("cli_test_models", factories / "models.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model, _ = module.build()
    return model


@pytest.fixture(scope="module")
def exported(factories: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """``models:build`` exported once with a dynamic length, checked in tract: by the
    installed console script in a child process, as users run it (the other tests run
    the command in this process)."""
    out = tmp_path_factory.mktemp("export")
    res = make_runner(real_process=True)("export", "models:build", "-o", out / "m.nnef.tgz", "--input-name", "inp",
                  "--output-name", "y", "--dynamic-axis", "inp:2:S", "--assert", "S <= 64", "--check",
                  "--save-io", out / "io", cwd=factories)
    assert res.returncode == 0, res.stderr
    return out / "m.nnef.tgz", out, res.stdout


def test_export_writes_and_checks_the_artifact(exported: tuple[Path, Path, str]) -> None:
    path, _, stdout = exported
    assert path.is_file()
    assert f"wrote {path} for tract" in stdout and "inputs inp; outputs y" in stdout
    assert "tract 0.23.9 vs PyTorch" in stdout and "all outputs match" in stdout


def test_exported_artifact_runs_another_length_in_tract(
        t2n_cli: Run, exported: tuple[Path, Path, str], factories: Path, tmp_path: Path) -> None:
    path, _, _ = exported
    model = _factory_model(factories)
    x = torch.rand(1, 3, 23)
    with torch.no_grad():
        ref = model(x).numpy()
    np.savez(tmp_path / "in.npz", inp=x.numpy())
    np.savez(tmp_path / "ref.npz", y=ref)
    res = t2n_cli("check", path, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "ref.npz")
    assert res.returncode == 0, res.stderr
    assert "ok   y: float32[1, 23, 2]" in res.stdout


def test_saved_example_io_checks(t2n_cli: Run, exported: tuple[Path, Path, str]) -> None:
    path, out, _ = exported
    res = t2n_cli("check", path, "--inputs", out / "io" / "inputs.npz", "--outputs", out / "io" / "outputs.npz")
    assert res.returncode == 0, res.stderr
    assert "all outputs match" in res.stdout


def test_inspect_of_the_export(t2n_cli: Run, exported: tuple[Path, Path, str]) -> None:
    info = json.loads(t2n_cli("inspect", exported[0], "--json").stdout)
    assert info["inputs"] == [{"name": "inp", "dtype": "f32", "shape": [1, 3, "S"]}]
    assert info["outputs"] == [{"name": "y", "dtype": "f32", "shape": [1, "S", 2]}]  # inferred by the reader
    assert info["symbols"] == ["S"] and "S <= 64" in info["assertions"]
    assert info["ops"]["conv"] == 1 and info["tensors"]["count"] == 4
    assert info["tensors"]["by_dtype"]["f32"]["elements"] == 4 * 3 * 3 + 4 + 2 * 4 + 2
    assert info["properties"]["t2n_version"]


@pytest.mark.slow
def test_torchscript_to_khronos(t2n_cli: Run, tmp_path: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.Tanh()).eval()
    x = torch.rand(2, 5)
    torch.jit.save(torch.jit.trace(model, (x,)), str(tmp_path / "m.pt"))
    res = t2n_cli("export", tmp_path / "m.pt", "--input-shape", "2,5", "--target", "khronos",
                  "-o", tmp_path / "k", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["target"] == "Khronos NNEF interpreter"
    with torch.no_grad():
        np.savez(tmp_path / "ref.npz", model(x).numpy())
    np.savez(tmp_path / "in.npz", x.numpy())
    res = t2n_cli("check", tmp_path / "k", "--engine", "khronos", "--inputs", tmp_path / "in.npz",
                  "--outputs", tmp_path / "ref.npz")
    assert res.returncode == 0, res.stderr


# -- bad specs: usage errors (2) when the spec names nothing; failures (1) when the
#    factory runs and goes wrong. Nothing is written either way.

@pytest.mark.parametrize(("spec", "message"), [
    ("no_such_module_xyz:build", "no module named 'no_such_module_xyz'"),
    ("fast:nope", "'fast' has no attribute 'nope'; callables defined there: raises, returns_four, returns_int"),
    ("fast:NOT_CALLABLE", "'fast:NOT_CALLABLE' is an int, not a callable"),
    ("fast.py", "'fast.py' is a Python file: name the factory in it as fast.py:FACTORY"),
    ("missing.py:build", "'missing.py' is not a file"),
    ("fast:", "the module and the factory must both be given"),
    ("fast:1x", "factory '1x' is not a Python name"),
    ("model.pt", "'model.pt' is not a file"),
])
def test_spec_naming_nothing_is_a_usage_error(t2n_cli: Run, factories: Path, tmp_path: Path,
                                              spec: str, message: str) -> None:
    res = t2n_cli("export", spec, "-o", tmp_path / "out.tgz", cwd=factories)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr
    assert not (tmp_path / "out.tgz").exists()


@pytest.mark.parametrize(("spec", "message"), [
    ("fast:returns_int", "the factory fast:returns_int returned an int; it must return (model, example_inputs)"),
    ("fast:returns_strings", "returned a str as the model (first item)"),
    ("fast:returns_four", "returned a tuple of 4 items; it must return (model, example_inputs)"),
    ("fast:raises", "RuntimeError: factory broke: cannot find weights.bin"),
    ("broken:build", "No module named 'a_package_that_is_not_installed_xyz'"),
])
def test_factory_going_wrong_fails_with_1(t2n_cli: Run, factories: Path, tmp_path: Path,
                                          spec: str, message: str) -> None:
    res = t2n_cli("export", spec, "-o", tmp_path / "out.tgz", cwd=factories)
    assert res.returncode == 1, res.stderr
    assert message in res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "out.tgz").exists()


def test_debug_shows_the_traceback(t2n_cli: Run, factories: Path, tmp_path: Path) -> None:
    res = t2n_cli("export", "fast:raises", "-o", tmp_path / "out.tgz", "--debug", cwd=factories)
    assert res.returncode == 1
    assert "Traceback" in res.stderr and "fast.py" in res.stderr and "in raises" in res.stderr
    plain = t2n_cli("export", "fast:raises", "-o", tmp_path / "out.tgz", cwd=factories)
    assert "run again with --debug for the traceback" in plain.stderr


@pytest.mark.parametrize("value", ["inp:1", "inp:1:S:T", "inp:x:S", "inp:1:9S", "1np:1:S", "inp:1:", ":1:S"])
def test_bad_dynamic_axis_syntax(t2n_cli: Run, factories: Path, tmp_path: Path, value: str) -> None:
    res = t2n_cli("export", "models:build", "-o", tmp_path / "o.tgz", "--dynamic-axis", value, cwd=factories)
    assert res.returncode == 2
    assert repr(value) in res.stderr and "INPUT:AXIS:SYMBOL, e.g. 'inp:1:S'" in res.stderr
    assert not (tmp_path / "o.tgz").exists()


@pytest.mark.parametrize(("args", "message"), [
    (("--dynamic-axis", "inp:1:S", "--dynamic-axis", "inp:1:T"), "axis 1 of input 'inp' is given two symbols"),
    (("--tract-version", "0.x"), "cannot read tract_version '0.x'"),
    (("--target", "khronos", "--tract-version", "0.21.0"), "--tract-version is for --target tract"),
    (("--target", "khronos", "--assert", "S < 4"), "Khronos NNEF has no extension lines"),
    (("--target", "onnx",), "'onnx' is not one of 'tract', 'khronos'"),
    (("--input-shape", "1,3,10"), "--input-shape/--input-dtype are for TorchScript files"),
    (("--input-shape", "1,a"), "'1,a' is not a shape"),
    (("--factory-arg", "length"), "'length' is not NAME=VALUE"),
    (("--compression-level", "12"), "12 is not in the range 0<=x<=9"),
    (("--tolerance", "tight"), "'tight' is not one of"),
])
def test_bad_options_are_usage_errors(t2n_cli: Run, factories: Path, tmp_path: Path,
                                      args: tuple[str, ...], message: str) -> None:
    res = t2n_cli("export", "models:build", "-o", tmp_path / "o.tgz", *args, cwd=factories)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr
    assert not (tmp_path / "o.tgz").exists()


def test_unknown_output_suffix_is_a_usage_error(t2n_cli: Run, factories: Path, tmp_path: Path) -> None:
    res = t2n_cli("export", "models:build", "-o", tmp_path / "model.zip", cwd=factories)
    assert res.returncode == 2
    assert "model.zip" in res.stderr and "'.zip' is not an artifact form" in res.stderr
    assert not (tmp_path / "model.zip").exists()


def test_users_folder_is_not_replaced(t2n_cli: Run, factories: Path, tmp_path: Path) -> None:
    mine = tmp_path / "results"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    res = t2n_cli("export", "models:build", "-o", mine, cwd=factories)
    assert res.returncode == 1
    assert "OverwriteRefusedError" in res.stderr and str(mine) in res.stderr and "overwrite" in res.stderr
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and (mine / "notes.txt").read_text() == "keep me"


def test_torchscript_without_shapes_is_a_usage_error(t2n_cli: Run, tmp_path: Path) -> None:
    (tmp_path / "m.pt").write_bytes(b"not really")
    res = t2n_cli("export", tmp_path / "m.pt", "-o", tmp_path / "o.tgz")
    assert res.returncode == 2
    assert "is a TorchScript file: give its example inputs' shapes with --input-shape" in res.stderr
    res = t2n_cli("export", tmp_path / "m.pt", "-o", tmp_path / "o.tgz", "--input-shape", "1,2",
                  "--input-shape", "3", "--input-dtype", "int64")
    assert res.returncode == 2 and "2 --input-shape but 1 --input-dtype" in res.stderr


@pytest.mark.slow
def test_export_errors_of_torch_models_fail_with_1(t2n_cli: Run, factories: Path, tmp_path: Path) -> None:
    """Two failures that need torch (a few seconds each to start): a file that is not
    TorchScript, and a dynamic axis on an input the model does not have."""
    (tmp_path / "m.pt").write_bytes(b"not really")
    res = t2n_cli("export", tmp_path / "m.pt", "-o", tmp_path / "o.tgz", "--input-shape", "1,2")
    assert res.returncode == 1
    assert f"cannot load {tmp_path / 'm.pt'} as TorchScript" in res.stderr and "torch.jit.save" in res.stderr
    res = t2n_cli("export", "models:build", "-o", tmp_path / "o.tgz", "--dynamic-axis", "x:2:S", cwd=factories)
    assert res.returncode == 1
    assert "DynamicAxesError" in res.stderr and "'x'" in res.stderr and "--input-name" in res.stderr
    assert not (tmp_path / "o.tgz").exists()
