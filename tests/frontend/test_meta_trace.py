"""Models built on the meta device trace with stand-ins for their weights (which
``weights_from`` supplies when the artifact is written): the forward pass may create
constants of its own (caches, position tables), which the artifact holds exactly; a
forward pass that reads a weight's value in Python is refused, never exported with the
stand-in's value baked in."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import t2n
from t2n.errors import TraceError
from t2n.frontend.meta_trace import stand_ins


class Positions(torch.nn.Module):
    """Builds a constant table in forward (as LLMs build masks and caches) and reads a
    real (non-meta) buffer beside its meta weights."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.register_buffer("freq", torch.arange(8, dtype=torch.float32), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        table = torch.tensor([[0.5] * 8, [1.5] * 8])  # a constant created while tracing
        return self.proj(x) * table[1] + self.freq


class ReadsWeight(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.proj.weight.abs().sum() > 0:  # a Python value from a weight's data
            return self.proj(x)
        return x


def _meta(cls: type[torch.nn.Module]) -> torch.nn.Module:
    with torch.device("meta"):
        model = cls().eval()
    return model


def test_constants_made_in_forward_are_exact(tmp_path: Path) -> None:
    torch.manual_seed(0)
    real = Positions().eval()
    weights = tmp_path / "w.safetensors"
    save_file({"proj.weight": real.proj.weight.detach(), "proj.bias": real.proj.bias.detach()}, weights)
    meta = _meta(Positions)
    meta.register_buffer("freq", torch.arange(8, dtype=torch.float32), persistent=False)
    x = torch.randn(2, 8)
    art = t2n.compile(meta, (x,), weights_from=weights)
    with torch.no_grad():
        expected = real(x)
    assert art.check(inputs=[x.numpy()], expected=[expected.numpy()]).ok
    assert all(t.is_meta for t in meta.proj.parameters())  # the model is left as it was


def test_reading_a_weight_value_is_refused(tmp_path: Path) -> None:
    weights = tmp_path / "w.safetensors"
    save_file({"proj.weight": torch.ones(8, 8), "proj.bias": torch.zeros(8)}, weights)
    out = tmp_path / "m.nnef.tgz"
    with pytest.raises(TraceError, match=r"proj\.weight") as info:
        t2n.export(_meta(ReadsWeight), (torch.randn(2, 8),), out, weights_from=weights)
    message = str(info.value)
    assert "test_meta_trace.py" in message and "load these weights" in message
    assert not out.exists()


def test_stand_ins_keep_ties_and_cost_no_memory() -> None:
    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Embedding(50_000, 1024), torch.nn.Linear(1024, 50_000))
    model[1].weight = model[0].weight
    with stand_ins(model) as named:
        assert model[1].weight is model[0].weight and not model[0].weight.is_meta
        assert len(named) == 2  # the tied weight once, the bias
        assert model[0].weight.data_ptr() != model[1].bias.data_ptr()
        assert float(model[0].weight[123, 45]) == 0.0
    assert model[0].weight.is_meta and model[1].weight is model[0].weight
