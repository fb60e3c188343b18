"""collapse-output-dims: size-1 axes are squeezed out of an output at the boundary."""

from __future__ import annotations

from pathlib import Path

import pytest

from t2n.errors import RemodelPlanError
from t2n.passes.remodel import CollapseInputDims, CollapseOutputDims
from t2n.reading import NNEFModel

from .conftest import remodel_and_compare


def test_outputs_lose_the_collapsed_batch(boundary_artifact: Path) -> None:
    plan = {"inputs": {"x": {"collapse_dims": [0]}},
            "outputs": {"probs": {"collapse_dims": [0]}, "energy": {"collapse_dims": [0]},
                        "frames": {"collapse_dims": ["B"]}}}
    model = remodel_and_compare(boundary_artifact, plan, [{"T": 1}, {"T": 4}])
    outs = [str(o) for o in model.interface().outputs]
    assert outs == ["probs: f32[6, T]", "pooled: f32[1, 6]", "frames: f32[T, 6]", "energy: f32[]"]
    assert model.output_names == ["probs", "pooled", "frames", "energy"]


def test_the_pass_reports_its_change(boundary: NNEFModel) -> None:
    CollapseInputDims("x", (0,))(boundary.graph)
    result = CollapseOutputDims("pooled", (0,))(boundary.graph)
    assert result.modified and result.stats == {"collapsed_axes": 1}


@pytest.mark.parametrize("output, axes, message", [
    ("probs", [0], "axis 0 of output 'probs'.*has size B"),
    ("probs", [1], "has size 6"),
    ("logits", [0], "no output 'logits'"),
])
def test_bad_axes_name_the_key(output: str, axes: list[int], message: str, boundary: NNEFModel) -> None:
    with pytest.raises(RemodelPlanError, match=message) as err:
        boundary.remodel({"outputs": {output: {"collapse_dims": axes}}})
    assert err.value.key == f"outputs.{output}.collapse_dims"
