"""eval-symbols: a symbol fixed to a size in the artifact (as tract's SetSymbols would):
shapes, sizes and assertions have the number; assertions left without a symbol go."""

from __future__ import annotations

from pathlib import Path

import pytest

from t2n.errors import RemodelPlanError
from t2n.passes.remodel import EvalSymbols
from t2n.reading import NNEFModel

from .conftest import remodel_and_compare


def test_time_fixed_to_one_step(boundary_artifact: Path) -> None:
    model = remodel_and_compare(boundary_artifact, {"inputs": {"x": {"eval_symbols": {"T": 1}}}},
                                [{"B": 1}, {"B": 3}])
    iface = model.interface()
    assert [str(i) for i in iface.inputs] == ["x: f32[B, 4, 1]", "length: i64[]"]
    assert iface.symbols == ("B",) and not any("T" in a for a in iface.assertions)
    assert "T" not in model.render().graph_nnef.split("graph main")[0].split("fragment")[0]


def test_the_pass_reports_its_change(boundary: NNEFModel) -> None:
    result = EvalSymbols({"T": 3})(boundary.graph)
    assert result.modified and result.stats["symbols_fixed"] == 1 and result.stats["rewritten"] >= 1


def test_an_unknown_symbol_names_the_key(boundary: NNEFModel) -> None:
    with pytest.raises(RemodelPlanError, match="input 'x'.*has no axis Q|no symbol Q") as err:
        boundary.remodel({"inputs": {"x": {"eval_symbols": {"Q": 2}}}})
    assert err.value.key == "inputs.x.eval_symbols.Q"


def test_a_symbol_of_another_input_names_the_key(boundary: NNEFModel) -> None:
    with pytest.raises(RemodelPlanError, match=r"input 'length' \(\[\]\) has no axis T") as err:
        boundary.remodel({"inputs": {"x": {"eval_symbols": {"T": 2}}, "length": {"eval_symbols": {"T": 3}}}})
    assert err.value.key == "inputs.length.eval_symbols.T"
