"""``t2n check``: an artifact run in tract (or the Khronos interpreter) on inputs from
a .npz file; compared with expected outputs, or printed and saved."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

from .cli_support import GRAPH_NNEF, WEIGHT, Run, write_artifact

INP = np.arange(12, dtype=np.float32).reshape(4, 3) / 7


def _expected() -> dict[str, np.ndarray]:
    out = INP + WEIGHT
    return {"out": out, "total": out.sum(keepdims=True).reshape(1, 1)}


def test_check_matches_expected_outputs(t2n_cli: Run, hand_artifact: Path, tmp_path: Path) -> None:
    np.savez(tmp_path / "in.npz", inp=INP)
    np.savez(tmp_path / "ref.npz", **_expected())
    res = t2n_cli("check", hand_artifact, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "ref.npz")
    assert res.returncode == 0, res.stderr
    assert "all outputs match" in res.stdout


def test_check_positional_arrays_and_json(t2n_cli: Run, hand_artifact: Path, tmp_path: Path) -> None:
    np.savez(tmp_path / "in.npz", INP)
    exp = _expected()
    np.savez(tmp_path / "ref.npz", exp["out"], exp["total"])
    res = t2n_cli("check", hand_artifact, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "ref.npz",
                  "--json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["ok"] and [o["name"] for o in report["outputs"]] == ["out", "total"]


def test_mismatch_exits_1_with_the_report(t2n_cli: Run, hand_artifact: Path, tmp_path: Path) -> None:
    np.savez(tmp_path / "in.npz", inp=INP)
    exp = _expected()
    exp["out"] = exp["out"] + np.float32(0.5)
    np.savez(tmp_path / "ref.npz", **exp)
    res = t2n_cli("check", hand_artifact, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "ref.npz")
    assert res.returncode == 1
    assert "FAIL out:" in res.stdout and "ok   total" in res.stdout
    assert "differ from" in res.stderr and "ref.npz" in res.stderr


def test_without_outputs_prints_and_writes_them(t2n_cli: Run, hand_artifact: Path, tmp_path: Path) -> None:
    np.savez(tmp_path / "in.npz", inp=INP)
    res = t2n_cli("check", hand_artifact, "--inputs", tmp_path / "in.npz", "-w", tmp_path / "got.npz")
    assert res.returncode == 0, res.stderr
    assert "out: float32[4, 3]" in res.stdout and "total: float32[1, 1]" in res.stdout
    with np.load(tmp_path / "got.npz") as got:
        np.testing.assert_allclose(got["out"], _expected()["out"], rtol=1e-6)


def test_khronos_engine_on_a_tar(t2n_cli: Run, tmp_path: Path) -> None:
    graph = "version 1.0;\n\ngraph main(inp) -> (out)\n{\n    inp = external<scalar>(shape = [4, 3]);\n" \
            '    w = variable<scalar>(shape = [1, 3], label = "layer.w");\n    out = add(inp, w);\n}\n'
    folder = write_artifact(tmp_path / "k", graph=graph)
    with tarfile.open(tmp_path / "k.tar", "w") as tar:
        for f in sorted(folder.iterdir()):
            tar.add(f, arcname=f.name)
    np.savez(tmp_path / "in.npz", inp=INP)
    np.savez(tmp_path / "ref.npz", out=INP + WEIGHT)
    res = t2n_cli("check", tmp_path / "k.tar", "--engine", "khronos", "--inputs", tmp_path / "in.npz",
                  "--outputs", tmp_path / "ref.npz")
    assert res.returncode == 0, res.stderr
    assert "Khronos NNEF interpreter vs PyTorch" in res.stdout and "all outputs match" in res.stdout


@pytest.mark.parametrize(("arrays", "message"), [
    ({"x": INP}, "the artifact's inputs are inp, but the file holds x; missing: inp; not inputs of the artifact: x"),
    ({"inp": INP.astype(np.float64)}, "input 'inp' is float64 but the artifact declares f32"),
    ({"inp": INP.reshape(3, 4)}, "input 'inp' has shape [3, 4] but the artifact declares [N, 3]"),
])
def test_bad_inputs_name_the_input(t2n_cli: Run, hand_artifact: Path, tmp_path: Path,
                                   arrays: dict[str, np.ndarray], message: str) -> None:
    np.savez(tmp_path / "in.npz", **arrays)
    res = t2n_cli("check", hand_artifact, "--inputs", tmp_path / "in.npz", "-w", tmp_path / "got.npz")
    assert res.returncode == 1
    assert message in res.stderr and "--inputs" in res.stderr
    assert not (tmp_path / "got.npz").exists()


def test_inputs_not_an_npz(t2n_cli: Run, hand_artifact: Path, tmp_path: Path) -> None:
    (tmp_path / "in.npz").write_text("inp = 1, 2, 3")
    res = t2n_cli("check", hand_artifact, "--inputs", tmp_path / "in.npz")
    assert res.returncode == 1
    assert "cannot read it as a .npz file" in res.stderr and "numpy.savez" in res.stderr


def test_engine_refusal_exits_1_and_says_what_tract_did(t2n_cli: Run, tmp_path: Path) -> None:
    art = write_artifact(tmp_path / "a", graph=GRAPH_NNEF.replace("add(inp, w)", "no_such_op_xyz(inp, w)"))
    np.savez(tmp_path / "in.npz", inp=INP)
    res = t2n_cli("check", art, "--inputs", tmp_path / "in.npz")
    assert res.returncode == 1
    assert "EngineError" in res.stderr and "tract refused" in res.stderr and "loading" in res.stderr


@pytest.mark.parametrize("args", [
    ("--engine", "onnxruntime"), ("--tolerance", "close"), ("--symbol", "N:4"), ("--symbol", "N=four"),
])
def test_bad_options_are_usage_errors(t2n_cli: Run, hand_artifact: Path, tmp_path: Path,
                                      args: tuple[str, ...]) -> None:
    np.savez(tmp_path / "in.npz", inp=INP)
    res = t2n_cli("check", hand_artifact, "--inputs", tmp_path / "in.npz", *args)
    assert res.returncode == 2
    assert args[1] in res.stderr


def test_inputs_option_is_required(t2n_cli: Run, hand_artifact: Path) -> None:
    res = t2n_cli("check", hand_artifact)
    assert res.returncode == 2 and "--inputs" in res.stderr


def test_khronos_engine_refuses_a_tract_artifact(t2n_cli: Run, hand_artifact: Path, tmp_path: Path) -> None:
    np.savez(tmp_path / "in.npz", inp=INP)
    res = t2n_cli("check", hand_artifact, "--engine", "khronos", "--inputs", tmp_path / "in.npz")
    assert res.returncode == 1
    assert f"{hand_artifact} is written for tract (it uses extension tract_core, symbol N)" in res.stderr
    assert "--engine tract" in res.stderr
