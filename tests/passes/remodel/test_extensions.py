"""extensions: lines added after the artifact's own (a ``tract_assert`` must name symbols
the graph has); assertions about symbols gone from the graph are pruned."""

from __future__ import annotations

from pathlib import Path

import pytest

from t2n.errors import RemodelPlanError
from t2n.passes.remodel import AddExtensions, PruneAssertions
from t2n.reading import NNEFModel

from .conftest import remodel_and_compare


def test_an_assertion_added_and_tract_runs_it(boundary_artifact: Path) -> None:
    model = remodel_and_compare(boundary_artifact, {"extensions": ["tract_assert T <= 64", "tract_assert B == 1"]},
                                [{"B": 1, "T": 3}])
    text = model.render().graph_nnef
    assert "extension tract_assert T <= 1000;\nextension tract_assert T <= 64;\nextension tract_assert B == 1;" \
        in text


def test_adding_lines_is_not_a_graph_edit(boundary: NNEFModel) -> None:
    result = AddExtensions(("tract_assert T >= 2", "tract_assert T >= 2"))(boundary.graph)
    assert not result.modified and result.stats == {"added": 1}
    assert boundary.graph.info.custom_extensions.count("tract_assert T >= 2") == 1


def test_assertions_about_a_collapsed_batch_are_pruned(boundary: NNEFModel) -> None:
    boundary.graph.info.custom_extensions.append("tract_assert B <= 8")
    boundary.remodel({"inputs": {"x": {"collapse_dims": [0]}}})
    assert not any("B" in line for line in boundary.graph.info.custom_extensions)
    assert PruneAssertions()(boundary.graph).stats == {"dropped": 0}


@pytest.mark.parametrize("line, message", [
    ("tract_assert Q <= 3", "names Q, which the graph does not have"),
    ("tract_registry tract_extra", "registries are added by t2n"),
    ("tract_assert T <= ", "a side of the comparison is empty"),
])
def test_bad_lines_name_the_key(line: str, message: str, boundary: NNEFModel) -> None:
    with pytest.raises(RemodelPlanError, match=message) as err:
        boundary.remodel({"extensions": ["tract_assert T >= 1", line]})
    assert err.value.key.startswith("extensions")
