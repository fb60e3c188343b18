"""The artifact the remodel pass tests start from, compiled once: a conv over
``x[B, 4, T]`` with a ``length`` input, four outputs (``probs[B, 6, T]``,
``pooled[B, 6]``, ``frames[B, T, 6]``, ``energy[B]``), symbols B and T, and a custom
assertion on T. Each test reads it, runs a pass, and runs the result in tract beside the
original on the same data."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest
import torch
from torch import nn

import t2n
from t2n.reading import NNEFModel
from t2n.remodel import apply_plan
from t2n.remodel.check import compare_runs


class Boundary(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(4, 6, 3, padding=1)

    def forward(self, x: torch.Tensor, length: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = self.conv(x)
        pooled = h.sum(-1) / length.float()
        return h.softmax(1), pooled, h.transpose(1, 2), (x * x).sum((1, 2))


@pytest.fixture(scope="session")
def boundary_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("boundary") / "boundary.nnef.tar"
    t2n.compile(Boundary().eval(), (torch.randn(2, 4, 5), torch.tensor(5)), input_names=["x", "length"],
                output_names=["probs", "pooled", "frames", "energy"], dynamic_axes={"x": {0: "B", 2: "T"}},
                custom_extensions=["tract_assert T <= 1000"]).save(path)
    return path


@pytest.fixture
def boundary(boundary_artifact: Path) -> NNEFModel:
    return t2n.read(boundary_artifact)


def remodel_and_compare(artifact: Path, plan: Mapping[str, object], sizes: Iterable[Mapping[str, int]],
                        subnet: str | None = None) -> NNEFModel:
    """Apply ``plan`` to the artifact read again, check the IR after every pass, and run the
    result and the original in tract at each of ``sizes`` (of the new symbols) on the same data."""
    original = t2n.read(artifact)
    model = t2n.read(artifact)
    done = apply_plan(model.graph, plan, subnet=subnet, verify_each=True)
    model.history.append(done)
    for at in sizes:
        report = compare_runs(done.io_map(), original.run, model.run, at)
        assert report.ok, f"at {at}:\n{report}"
    return model
