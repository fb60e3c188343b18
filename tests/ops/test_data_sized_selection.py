"""Selections whose size comes from the data: ``nonzero`` / ``argwhere`` (also
``as_tuple``), ``masked_select`` and indexing by a boolean mask computed in the model.
tract counts the True elements while running (the positions are built as
``repeat_interleave``'s computed repeats are, :mod:`tests.ops.test_data_sized_repeat`).
Each artifact is compiled once (with each frontend: torch.export's size made from the data
is that count) and run in tract at other inputs, with other counts (none and all
included), against PyTorch."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import t2n
from t2n.errors import UnsupportedOpsError
from t2n.testing import Lambda

GEN = torch.Generator().manual_seed(3)


def matches_at(art: t2n.Artifact, model: nn.Module, *inputs: torch.Tensor) -> None:
    with torch.no_grad():
        out = model(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    report = art.check(inputs=[i.numpy() for i in inputs], expected=[o.numpy() for o in outs])
    assert report.ok, report


def counts_of(threshold: float) -> list[torch.Tensor]:
    """Inputs whose elements above ``threshold`` number some, all, and none."""
    return [torch.rand(3, 4, generator=GEN), torch.full((3, 4), threshold + 0.1),
            torch.rand(3, 4, generator=GEN) * threshold]


@pytest.mark.parametrize("fn", [
    lambda x: torch.nonzero(x > 0.3) * 2,
    lambda x: torch.argwhere(x > 0.3),
    lambda x: torch.nonzero(torch.relu(x - 0.3)),                  # non-zero numbers, not a mask
    lambda x: sum(torch.nonzero(x > 0.3, as_tuple=True)),
    lambda x: torch.where(x > 0.3)[1] * 2,                          # where(condition): the same
    lambda x: torch.masked_select(x, x > 0.3) * 3,
    lambda x: torch.masked_select(x, x[0] > 0.3),                  # a mask broadcast to x
    lambda x: x[x > 0.3],
    lambda x: x[x[:, 0] > 0.3] + 1,                                # whole rows
    lambda x: x.flatten()[torch.nonzero(x.flatten() > 0.3).flatten()],
], ids=["nonzero", "argwhere", "nonzero_numbers", "as_tuple", "where_condition", "masked_select", "masked_select_broadcast",
        "mask_index", "row_mask", "gather_by_nonzero"])
@pytest.mark.parametrize("frontend", ["jit", "export"])
def test_selection_counts_follow_the_data(fn, frontend: str) -> None:
    model = Lambda(fn).eval()
    art = t2n.compile(model, (torch.rand(3, 4, generator=GEN),), frontend=frontend)
    for x in counts_of(0.3):
        matches_at(art, model, x)


class ValidTokens(nn.Module):
    """diffusers' Mochi attention: the prompt tokens its mask keeps, found with
    ``nonzero`` and taken along the sequence axis, joined to the image tokens, attended,
    then padded back to the full length (an amount known only while running)."""

    def forward(self, q: torch.Tensor, enc: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        valid = torch.nonzero(mask.flatten(), as_tuple=False).flatten()
        joined = torch.cat([q, enc[:, :, valid, :]], dim=2)
        out = torch.softmax(joined @ joined.transpose(-1, -2), dim=-1) @ joined
        total = q.size(2) + enc.size(2)
        return nn.functional.pad(out, (0, 0, 0, total - out.size(2)), value=-1.0)


@pytest.mark.parametrize("frontend", ["jit", "export"])
def test_tokens_kept_by_a_run_time_mask_and_padded_back(frontend: str) -> None:
    model = ValidTokens()
    q, enc = torch.randn(1, 2, 3, 4, generator=GEN), torch.randn(1, 2, 5, 4, generator=GEN)
    art = t2n.compile(model, (q, enc, torch.tensor([True, False, True, True, False])), frontend=frontend)
    for mask in ([True] * 5, [False, False, False, False, True], [False] * 5):
        matches_at(art, model, torch.randn(1, 2, 3, 4, generator=GEN), enc, torch.tensor(mask))


def test_padding_to_a_length_from_data_is_refused_naming_it() -> None:
    model = Lambda(lambda x: nn.functional.pad(x, (0, torch.nonzero(x > 0.5).shape[0])))
    with pytest.raises(UnsupportedOpsError, match="to a length that comes from tensor data"):
        t2n.compile(model, (torch.rand(3, 4),))


@pytest.mark.parametrize("axes", [{0: "B"}, {1: "T"}, {0: "B", 1: "T"}], ids=["rows", "columns", "both"])
def test_coordinates_follow_dynamic_axes(axes) -> None:
    """The coordinates divide the position by the later axes' sizes, read from the graph."""
    model = Lambda(lambda x: (torch.nonzero(x > 0.3), x[x > 0.3], torch.masked_select(x, x > 0.3),
                              torch.masked_select(x, x[:1] > 0.3), torch.masked_select(x[:, :1], x > 0.3)))
    art = t2n.compile(model, (torch.rand(3, 4, generator=GEN),), dynamic_axes={"input_0": axes})
    for shape in ((3, 4), (1, 4), (6, 4), (3, 7), (2, 1), (5, 2)):
        if all(n == (3, 4)[a] for a, n in enumerate(shape) if a not in axes):
            matches_at(art, model, torch.rand(*shape, generator=GEN))


def test_nonzero_of_a_run_time_scalar_is_refused_naming_it() -> None:
    with pytest.raises(UnsupportedOpsError, match="nonzero of a 0-d tensor"):
        t2n.compile(Lambda(lambda x: torch.nonzero(x.sum() > 0)), (torch.rand(3, 4),))
