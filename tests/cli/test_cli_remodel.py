"""``t2n remodel ARTIFACT --plan plan.yaml -o OUT`` and ``t2n inspect --plan``: the
interface before and after, what each boundary pass did, an engine check of the result
against the original, and plan mistakes reported by key with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import t2n

from .cli_support import Run

PLAN = """\
inputs:
  x:
    original_shape: [B, 4, T]
    collapse_dims: [B]
  length:
    bind_scalar_to_dim_size: x.T
outputs:
  y:
    collapse_dims: [0]
renamed_symbols:
  frames: [T]
extensions:
  - tract_assert frames <= 3000
"""


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv1d(4, 3, 3, padding=1)

    def forward(self, x: torch.Tensor, length: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.conv(x)
        return y, y.sum(-1) / length


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("remodel") / "enc.nnef.tgz"
    t2n.compile(Model().eval(), (torch.randn(1, 4, 6), torch.tensor(6.0)), input_names=["x", "length"],
                output_names=["y", "mean"], dynamic_axes={"x": {0: "B", 2: "T"}}).save(path)
    return path


def test_remodel_writes_checks_and_reports(t2n_cli: Run, artifact: Path, tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(PLAN)
    res = t2n_cli("remodel", artifact, "--plan", tmp_path / "plan.yaml", "-o", tmp_path / "out.nnef.tgz", "--check")
    assert res.returncode == 0, res.stderr
    assert "    x: f32[B, 4, T]\n    length: f32[]" in res.stdout
    assert "remodelled (plan.yaml):\n  inputs:\n    x: f32[4, frames]\n  outputs:\n    y: f32[3, frames]" in res.stdout
    assert "bind-scalar-to-dim-size.bound = 1" in res.stdout
    assert "check at {'frames': 1}: ok" in res.stdout and "check at {'frames': 5}: ok" in res.stdout
    iface = t2n.read(tmp_path / "out.nnef.tgz").interface()
    assert [str(i) for i in iface.inputs] == ["x: f32[4, frames]"]
    assert iface.assertions == ("frames >= 1", "frames <= 3000")


def test_remodel_as_json_with_sizes(t2n_cli: Run, artifact: Path, tmp_path: Path) -> None:
    (tmp_path / "plan.json").write_text(json.dumps({"enc": {"outputs_keep": ["mean"]}, "dec": {}}))
    res = t2n_cli("remodel", artifact, "--plan", tmp_path / "plan.json", "--subnet", "enc", "-o", tmp_path / "o",
                  "--check", "--size", "B=2", "--size", "T=9", "--json")
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert [o["name"] for o in info["after"]["outputs"]] == ["mean"]
    assert info["checks"][0]["sizes"] == {"B": 2, "T": 9} and info["checks"][0]["ok"]
    assert info["passes"]["outputs-keep.ops_removed"] == 0


def test_a_plan_that_does_not_fit_fails_by_key_and_writes_nothing(t2n_cli: Run, artifact: Path,
                                                                    tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text("inputs:\n  x:\n    collapse_dims: [1]\n")
    res = t2n_cli("remodel", artifact, "--plan", tmp_path / "plan.yaml", "-o", tmp_path / "out")
    assert res.returncode == 1
    assert "RemodelPlanError: remodel plan, inputs.x.collapse_dims: axis 1 of 'x' has size 4" in res.stderr
    assert not (tmp_path / "out").exists()


def test_inspect_shows_the_interface_a_plan_gives(t2n_cli: Run, artifact: Path, tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(PLAN)
    res = t2n_cli("inspect", artifact, "--plan", tmp_path / "plan.yaml")
    assert res.returncode == 0, res.stderr
    assert "outputs:\n  y: f32[B, 3, T]\n  mean: f32[B, 3]" in res.stdout
    assert "  inputs:\n    x: f32[4, frames]\n  outputs:\n    y: f32[3, frames]\n    mean: f32[1, 3]" in res.stdout
    info = json.loads(t2n_cli("inspect", artifact, "--plan", tmp_path / "plan.yaml", "--json").stdout)
    assert info["remodelled"]["symbols"] == ["frames"]
    assert info["outputs"][1] == {"name": "mean", "dtype": "f32", "shape": ["B", 3]}
