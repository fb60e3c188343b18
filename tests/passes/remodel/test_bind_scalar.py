"""bind-scalar-to-dim-size: ``length`` leaves the interface; its readers get the size of
x's axis T, which stays symbolic, and the model computes what it did with length = T."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import t2n
from t2n.errors import RemodelPlanError
from t2n.passes.remodel import BindScalarToDimSize
from t2n.reading import NNEFModel

from .conftest import remodel_and_compare


@pytest.mark.parametrize("bind", ["x.T", "x.2", "x.-1", "encoder.x.T", "x.t"])
def test_length_bound_to_the_time_axis(bind: str, boundary_artifact: Path) -> None:
    model = remodel_and_compare(boundary_artifact, {"inputs": {"length": {"bind_scalar_to_dim_size": bind}}},
                                [{"B": 1, "T": 1}, {"B": 2, "T": 5}, {"B": 1, "T": 9}])
    assert [i.name for i in model.interface().inputs] == ["x"]
    assert model.history[-1].result.stats["bind-scalar-to-dim-size.bound"] == 1
    text = model.render().graph_nnef
    assert "tract_core_shape_of(x)" in text and "length = external" not in text


def test_a_static_axis_binds_to_its_number(boundary_artifact: Path) -> None:
    model = remodel_and_compare(boundary_artifact, {"inputs": {"length": {"bind_scalar_to_dim_size": "x.1"}}},
                                [{"B": 2, "T": 3}])
    assert "tract_core_shape_of" not in model.render().graph_nnef


def test_the_pass_reports_its_change(boundary: NNEFModel) -> None:
    result = BindScalarToDimSize("length", "x", 2)(boundary.graph)
    assert result.modified and result.stats == {"bound": 1, "readers": 1}
    assert [v.name for v in boundary.graph.inputs] == ["x"]


@pytest.mark.parametrize("plan, key, message", [
    ({"x": {"bind_scalar_to_dim_size": "length.0"}}, "inputs.x.bind_scalar_to_dim_size",
     "only a single value"),
    ({"length": {"bind_scalar_to_dim_size": "y.T"}}, "inputs.length.bind_scalar_to_dim_size", "no input 'y'"),
    ({"length": {"bind_scalar_to_dim_size": "x.7"}}, "inputs.length.bind_scalar_to_dim_size",
     "axis 7 is out of range"),
    ({"length": {"bind_scalar_to_dim_size": "x.Q"}}, "inputs.length.bind_scalar_to_dim_size", "no axis Q"),
    ({"length": {"bind_scalar_to_dim_size": "length.0"}}, "inputs.length.bind_scalar_to_dim_size",
     "its own size"),
])
def test_bad_binds_name_the_key(plan: dict[str, object], key: str, message: str, boundary: NNEFModel) -> None:
    with pytest.raises(RemodelPlanError, match=message) as err:
        boundary.remodel({"inputs": plan})
    assert err.value.key == key


class Encoder(torch.nn.Module):
    """A NeMo-style encoder boundary: ``audio[B, 4, T]`` and ``length[B]``."""

    def forward(self, audio: torch.Tensor, length: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return audio.mean(1) * length.unsqueeze(1).float(), length * 2


def test_a_batched_length_collapsed_then_bound(tmp_path: Path) -> None:
    """``length[B]``: B collapsed on both inputs (fixed to 1), then length bound to T,
    as the other exporter's NeMo plans say (axes of the bound source counted after its
    collapse)."""
    t2n.compile(Encoder(), (torch.randn(1, 4, 6), torch.tensor([6])), input_names=["audio", "length"],
                output_names=["encoded", "encoded_len"],
                dynamic_axes={"audio": {0: "B", 2: "T"}, "length": {0: "B"}}).save(tmp_path / "e")
    plan = {"inputs": {"audio": {"original_shape": ["B", 4, "T"], "collapse_dims": ["B"]},
                       "length": {"original_shape": ["B"], "collapse_dims": [0],
                                  "bind_scalar_to_dim_size": "encoder.audio.2"}},
            "outputs": {"encoded": {"collapse_dims": [0]}, "encoded_len": {"collapse_dims": [0]}}}
    model = remodel_and_compare(tmp_path / "e", plan, [{"T": 1}, {"T": 7}])
    assert [str(i) for i in model.interface().inputs] == ["audio: f32[4, T]"]
    assert [str(o) for o in model.interface().outputs] == ["encoded: f32[T]", "encoded_len: i64[]"]
