"""An exported LLM's attention masks come from positions and keep each query's own key:
the guard that zeroes rows without any key is dropped from the default artifact, while
a mask given as an input keeps it."""

from __future__ import annotations

import tarfile
from pathlib import Path

import numpy as np
import torch

import t2n
from t2n.llm import export_llm, tract_greedy_generate
from t2n.llm.common.attention_rows import DropEmptyRowGuards

from .tiny_models import reference_tokens, tiny_model


def test_llm_attention_has_no_row_guard(tmp_path: Path) -> None:
    model = tiny_model("llama")
    path = export_llm(model, tmp_path / "out")
    with tarfile.open(path) as tar:
        graph = tar.extractfile("graph.nnef").read().decode()  # type: ignore[union-attr]
    assert "softmax(" in graph and "any_reduce(" not in graph
    prompt = torch.randint(0, 96, (1, 5), generator=torch.Generator().manual_seed(3))
    assert tract_greedy_generate(path.parent.parent, prompt, 8) == reference_tokens(model, prompt, 8)


class _MaskedAttention(torch.nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)


def test_guard_over_an_input_mask_is_kept() -> None:
    """A row that the input mask empties still gives zeros, as in PyTorch."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 3, 8, generator=g) for _ in range(3))
    keep = torch.tensor([[True, False, True, True], [False, False, False, False], [True, True, True, False]])
    k, v = k.repeat(1, 1, 2, 1)[:, :, :4], v.repeat(1, 1, 2, 1)[:, :, :4]
    artifact = t2n.compile(_MaskedAttention(), (q, k, v, keep), t2n.TractNNEF(), passes=[DropEmptyRowGuards()])
    assert "any_reduce" in [op.kind for op in artifact.ir.ops()]
    assert artifact.check().ok
    expected = _MaskedAttention()(q, k, v, keep)
    assert np.all(expected[:, :, 1].numpy() == 0)
