"""collapse-input-dims: a size-1 axis leaves an input (``[B, 4, T]`` → ``[4, T]``, the
batch symbol fixed to 1 everywhere, its assertion gone); the model computes what it did
with that axis put back."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import t2n
from t2n.errors import RemodelPlanError
from t2n.passes.remodel import CollapseInputDims
from t2n.reading import NNEFModel

from .conftest import remodel_and_compare


@pytest.mark.parametrize("axes", [[0], ["B"], [-3], ["b"]])
def test_a_dynamic_batch_collapsed(axes: list[object], boundary_artifact: Path) -> None:
    model = remodel_and_compare(boundary_artifact, {"inputs": {"x": {"collapse_dims": axes}}},
                                [{"T": 1}, {"T": 6}])
    iface = model.interface()
    assert [str(i) for i in iface.inputs] == ["x: f32[4, T]", "length: i64[]"]
    assert [str(o) for o in iface.outputs] == ["probs: f32[1, 6, T]", "pooled: f32[1, 6]", "frames: f32[1, T, 6]",
                                               "energy: f32[1]"]
    assert iface.symbols == ("T",) and "B >= 1" not in iface.assertions and "T <= 1000" in iface.assertions
    assert model.history[-1].result.stats["collapse-input-dims.symbols_fixed"] == 1


def test_a_static_axis_collapsed(tmp_path: Path) -> None:
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 2, 3).eval()
    t2n.compile(conv, (torch.randn(1, 3, 5, 5),), dynamic_axes={"input_0": {2: "H"}}).save(tmp_path / "c")
    model = remodel_and_compare(tmp_path / "c", {"inputs": {"input_0": {"collapse_dims": [0]}},
                                                 "outputs": {"output_0": {"collapse_dims": [0]}}},
                                [{"H": 3}, {"H": 8}])
    assert [str(i) for i in model.interface().inputs] == ["input_0: f32[3, H, 5]"]
    assert [str(o) for o in model.interface().outputs] == ["output_0: f32[2, H - 2, 3]"]


def test_the_pass_reports_its_change(boundary: NNEFModel) -> None:
    result = CollapseInputDims("x", (0,))(boundary.graph)
    assert result.modified and result.stats["collapsed_axes"] == 1 and result.stats["symbols_fixed"] == 1


@pytest.mark.parametrize("axes, message", [
    ([1], "axis 1 of 'x' has size 4"), ([2, 0, 7], "axis 7 is out of range"), ([0, -3], "names an axis twice"),
])
def test_bad_axes_name_the_key(axes: list[int], message: str, boundary: NNEFModel) -> None:
    with pytest.raises(RemodelPlanError, match=message) as err:
        boundary.remodel({"inputs": {"x": {"collapse_dims": axes}}})
    assert err.value.key == "inputs.x.collapse_dims"
