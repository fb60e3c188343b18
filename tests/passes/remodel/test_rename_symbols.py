"""renamed-symbols: symbols take the application's names; several old names given one new
name merge into one symbol; assertions follow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import t2n
from t2n.errors import EngineError, RemodelPlanError
from t2n.passes.remodel import RenameSymbols
from t2n.reading import NNEFModel

from .conftest import remodel_and_compare


def test_symbols_renamed(boundary_artifact: Path) -> None:
    model = remodel_and_compare(boundary_artifact, {"renamed_symbols": {"frames_n": ["T"], "batch": "B"}},
                                [{"batch": 1, "frames_n": 1}, {"batch": 2, "frames_n": 8}])
    iface = model.interface()
    assert [str(i) for i in iface.inputs] == ["x: f32[batch, 4, frames_n]", "length: i64[]"]
    assert iface.symbols == ("batch", "frames_n")
    assert "frames_n <= 1000" in iface.assertions and "batch >= 1" in iface.assertions
    text = model.render().graph_nnef
    assert "extension tract_symbol frames_n;" in text and " T" not in text


class TwoStreams(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a * 2.0, torch.cat([a, b], 1).sum(1)


def test_two_symbols_merged_into_one(tmp_path: Path) -> None:
    """tract cannot load the original (a concat of an A-long and a B-long axis); merged
    into one symbol N, it loads and gives PyTorch's outputs."""
    t2n.compile(TwoStreams(), (torch.randn(3, 2), torch.randn(3, 4)), input_names=["a", "b"],
                dynamic_axes={"a": {0: "A"}, "b": {0: "B"}}).save(tmp_path / "m")
    with pytest.raises(EngineError, match="Inconsistent concat"):
        t2n.read(tmp_path / "m").run([np.zeros((2, 2), np.float32), np.zeros((2, 4), np.float32)])
    model = t2n.read(tmp_path / "m").remodel({"renamed_symbols": {"N": ["A", "B"]}}, verify=True)
    assert [str(i) for i in model.interface().inputs] == ["a: f32[N, 2]", "b: f32[N, 4]"]
    assert model.interface().symbols == ("N",)
    for n in (1, 5):
        a, b = torch.randn(n, 2), torch.randn(n, 4)
        for got, want in zip(model.run([a.numpy(), b.numpy()]), TwoStreams()(a, b)):
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


def test_the_pass_reports_its_change(boundary: NNEFModel) -> None:
    result = RenameSymbols({"T": "time"})(boundary.graph)
    assert result.modified and result.stats == {"renamed": 1, "rewritten": 1}  # the input; the rest is inferred


@pytest.mark.parametrize("renames, message", [
    ({"time": ["Q"]}, "no symbol Q"),
    ({"x": ["T"]}, "x already names an input or output"),
    ({"t1": ["T"], "t2": ["T"]}, "T is already renamed to t1"),
    ({"2t": ["T"]}, "is not a symbol name"),
])
def test_bad_renames_name_the_key(renames: dict[str, list[str]], message: str, boundary: NNEFModel) -> None:
    with pytest.raises(RemodelPlanError, match=message) as err:
        boundary.remodel({"renamed_symbols": renames})
    assert err.value.key.startswith("renamed_symbols")
