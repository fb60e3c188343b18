"""Integer indexing in Khronos NNEF: ``x[idx]`` (negative indices count from the end),
several index tensors, ``index_select``, ``torch.gather`` and ``torch.take``, exported
in standard operations and run in the nnef-tools interpreter (and in tract) against
PyTorch. The index arithmetic (negative-index normalisation, merged indices, flat
positions) is written on reals with ``cast<scalar>``/``cast<integer>``; see
docs/khronos.md.
"""

import pytest
import torch

import t2n
from t2n.errors import NotExpressibleError
from t2n.testing import Lambda, check_export

X = torch.randn(5, 6)
X3 = torch.randn(4, 5, 3)
NEG = torch.tensor([0, -1, 2, -5, 4])

CASES = {
    "first_axis_negative": (lambda x, i: x[i], (X, NEG)),
    "second_axis_negative": (lambda x, i: x[:, i], (X, torch.tensor([-6, 5, -1, 0]))),
    "index_matrix": (lambda x, i: x[i], (X3, torch.tensor([[0, -1], [-4, 3], [2, -2]]))),
    "middle_axis_of_3d": (lambda x, i: x[:, i] * 2, (X3, torch.tensor([-5, 4, 0]))),
    "int32_indices": (lambda x, i: x[i], (X, NEG.to(torch.int32))),
    "two_index_tensors": (lambda x, i, j: x[i, j], (X, torch.tensor([0, -1, 3]), torch.tensor([-6, 2, -1]))),
    "index_then_math": (lambda x, i: x[i].sum(0) + x[-1], (X, NEG)),
    "index_select": (lambda x, i: x.index_select(1, i), (X, torch.tensor([5, 0, 3, 3]))),
    "index_select_axis0": (lambda x, i: torch.index_select(x, 0, i), (X3, torch.tensor([3, 0]))),
    "gather": (lambda x, i: x.gather(1, i), (X, torch.tensor([[0, 5], [1, 2], [3, 0], [4, 3], [5, 5]]))),
    "gather_axis0_3d": (lambda x, i: torch.gather(x, 0, i), (X3, torch.randint(0, 4, (2, 5, 3)))),
    "gather_smaller_index": (lambda x, i: x.gather(2, i), (X3, torch.randint(0, 3, (4, 2, 2)))),
    "take_negative": (lambda x, i: torch.take(x, i), (X, torch.tensor([[0, -1], [-30, 29]]))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_integer_indexing_runs_in_both_engines(name):
    fn, args = CASES[name]
    result = check_export(Lambda(fn), args)
    text = result.artifacts["khronos"].graph_nnef
    assert "fragment" not in text and "extension" not in text
    assert "gather(" in text


def test_negative_indices_are_normalised_on_reals():
    result = check_export(Lambda(CASES["first_axis_negative"][0]), CASES["first_axis_negative"][1],
                          targets=("khronos",))
    text = result.artifacts["khronos"].graph_nnef
    assert "cast<scalar>" in text and "cast<integer>" in text and "select(" in text


def test_integer_arithmetic_with_another_use_is_still_refused():
    """Only values that serve as gather indices are computed on reals."""
    model = Lambda(lambda x, i: (x[i], i + 1))
    with pytest.raises(NotExpressibleError, match="'add' on i64 tensors"):
        t2n.compile(model, (X, NEG), t2n.KhronosNNEF())
