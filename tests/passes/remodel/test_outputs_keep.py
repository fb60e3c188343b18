"""outputs-keep: only the listed outputs, in the listed order; the ops only the others
needed are gone (inputs stay: they are the application's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from t2n.errors import RemodelPlanError
from t2n.passes.remodel import KeepOutputs
from t2n.reading import NNEFModel

from .conftest import remodel_and_compare


def test_two_outputs_kept_in_the_plan_order(boundary_artifact: Path) -> None:
    model = remodel_and_compare(boundary_artifact, {"outputs_keep": ["pooled", "probs"]},
                                [{"B": 1, "T": 2}, {"B": 3, "T": 7}])
    assert model.output_names == ["pooled", "probs"]
    text = model.render().graph_nnef
    assert "graph main(x, length) -> (pooled, probs)" in text and "transpose" not in text
    assert model.history[-1].result.stats["outputs-keep.ops_removed"] >= 3


def test_the_pass_reports_what_it_removed(boundary: NNEFModel) -> None:
    before = len(boundary.graph)
    result = KeepOutputs(("energy",))(boundary.graph)
    assert result.modified and result.stats["outputs_dropped"] == 3
    assert before - len(boundary.graph) == result.stats["ops_removed"] > 0
    assert [v.name for v in boundary.graph.inputs] == ["x", "length"]


def test_keeping_everything_in_order_changes_nothing(boundary: NNEFModel) -> None:
    result = KeepOutputs(("probs", "pooled", "frames", "energy"))(boundary.graph)
    assert not result.modified


def test_an_unknown_output_names_the_key(boundary: NNEFModel) -> None:
    with pytest.raises(RemodelPlanError, match="no output 'logits'") as err:
        boundary.remodel({"outputs_keep": ["pooled", "logits"]})
    assert err.value.key == "outputs_keep"
