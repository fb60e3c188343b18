"""With the last position's logits kept (the default), the last layer computes its
queries, attention output, MLP or experts for that position only; the keys and values
of every position still reach the cache, and generation stays identical."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest
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


@pytest.mark.parametrize("family", ["llama", "mixtral"])
def test_last_layer_computes_the_kept_position(family: str, tmp_path: Path) -> None:
    model = tiny_model(family)
    path = export_llm(model, tmp_path / "out")
    graph = _graph(path)
    last = model.config.num_hidden_layers - 1
    q_proj = re.search(rf"= linear\((\w+), \w*layers_{last}_self_attn_q_proj\w*, ", graph)
    assert q_proj is not None
    assert _definition(graph, q_proj.group(1)).startswith("slice(")  # one row into the query projection
    if family == "mixtral":
        experts = re.findall(r"= tract_moe_ffn\((\w+), ", graph)
        assert _definition(graph, experts[-1]).endswith("shape = [1, 64])")  # one token to the experts
        assert all(_definition(graph, x).endswith("shape = [S, 64])") for x in experts[:-1])
    prompt = torch.randint(1, 96, (1, 5), generator=torch.Generator().manual_seed(3))
    assert tract_greedy_generate(tmp_path / "out", prompt, 8) == reference_tokens(model, prompt, 8)

