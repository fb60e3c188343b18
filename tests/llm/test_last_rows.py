"""With the last position's logits kept (the default), the last layer's experts route
that position only (tract moves the slice through its own ops, not through
``tract_moe_ffn``); generation stays identical."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import torch

from t2n.llm import export_llm, tract_greedy_generate

from .tiny_models import reference_tokens, tiny_model


def _graph(path: Path) -> str:
    with tarfile.open(path) as tar:
        return tar.extractfile("graph.nnef").read().decode()  # type: ignore[union-attr]


def _definition(graph: str, name: str) -> str:
    found = re.search(rf"^\s*{re.escape(name)} = (.*);$", graph, re.M)
    assert found is not None, name
    return found.group(1)


def test_last_layer_routes_the_kept_position_only(tmp_path: Path) -> None:
    model = tiny_model("mixtral")
    path = export_llm(model, tmp_path / "out")
    graph = _graph(path)
    experts = re.findall(r"= tract_moe_ffn\((\w+), ", graph)
    assert len(experts) == model.config.num_hidden_layers
    assert _definition(graph, experts[-1]).endswith("shape = [1, 64])")  # one token to the experts
    assert all(_definition(graph, x).endswith("shape = [S, 64])") for x in experts[:-1])
    prompt = torch.randint(1, 96, (1, 5), generator=torch.Generator().manual_seed(3))
    assert tract_greedy_generate(tmp_path / "out", prompt, 8) == reference_tokens(model, prompt, 8)
