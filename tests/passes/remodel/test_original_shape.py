"""remodel-original-shape: the plan says what an input looks like before the plan; a
plan written for another export fails by name, before anything changes."""

from __future__ import annotations

import pytest

from t2n.errors import RemodelPlanError
from t2n.passes.remodel import CheckOriginalShape
from t2n.reading import NNEFModel


def test_a_matching_shape_changes_nothing(boundary: NNEFModel) -> None:
    result = CheckOriginalShape("x", ("B", 4, "T"))(boundary.graph)
    assert not result.modified and result.stats == {"checked": 1}


@pytest.mark.parametrize("shape", [["B", 4], ["B", 5, "T"], ["N", 4, "T"], [1, 4, "T"]])
def test_another_shape_names_the_key_and_changes_nothing(shape: list[object], boundary: NNEFModel) -> None:
    before = boundary.graph.edits
    with pytest.raises(RemodelPlanError, match=r"input 'x' is \['B', '4', 'T'\] in the graph") as err:
        boundary.remodel({"inputs": {"x": {"original_shape": shape, "collapse_dims": [0]}}})
    assert err.value.key == "inputs.x.original_shape" and boundary.graph.edits == before
