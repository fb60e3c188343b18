"""Rotary embeddings and RMS normalizations as tract's own ops (``reify_rope``,
``reify_rms_norm``), found in the IR by pattern: generation stays identical, and a
pattern that is not exactly the rotation is left alone."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
import torch

import t2n
from t2n.llm import export_llm, tract_greedy_generate
from t2n.passes.reify_transformers import ReifyRmsNorm, ReifyRope

from .tiny_models import reference_tokens, tiny_model

NEW_TOKENS = 16


def _graph(path: Path) -> str:
    with tarfile.open(path) as tar:
        return tar.extractfile("graph.nnef").read().decode()  # type: ignore[union-attr]


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_reified_ops_generate_identically(family: str, tmp_path: Path) -> None:
    model = tiny_model(family)
    path = export_llm(model, tmp_path / "out", reify_rope=True, reify_rms_norm=True, reify_sdpa_operator=True)
    text = _graph(path)
    assert text.count("tract_transformers_apply_rope(") == 4  # q and k of 2 layers
    assert text.count("tract_core_rms_norm(") == 5  # 2 per layer, then the final norm
    assert "rsqrt(" not in text and "neg(" not in text
    prompt = torch.randint(1, 96, (1, 5), generator=torch.Generator().manual_seed(3))
    assert tract_greedy_generate(tmp_path / "out", prompt, NEW_TOKENS) == reference_tokens(model, prompt, NEW_TOKENS)


def test_older_tract_keeps_the_decomposed_forms(tmp_path: Path) -> None:
    path = export_llm(tiny_model("llama"), tmp_path / "out", reify_rope=True, reify_rms_norm=True,
                      tract_version="0.21.19")
    text = _graph(path)
    assert "apply_rope" not in text and "rms_norm" not in text and "tract_transformers" not in text


class _Rope(torch.nn.Module):
    def __init__(self, swapped: bool = False) -> None:
        super().__init__()
        self.swapped = swapped

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        a, b = x[..., :4], x[..., 4:]
        rotated = torch.cat([b, -a], dim=-1) if self.swapped else torch.cat([-b, a], dim=-1)
        return x * cos + rotated * sin


def _rope_inputs() -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(shape, generator=g) for shape in ((1, 2, 3, 8), (1, 1, 3, 8), (1, 1, 3, 8)))


def test_rope_pattern_becomes_one_op_with_the_same_numbers() -> None:
    artifact = t2n.compile(_Rope(), _rope_inputs(), t2n.TractNNEF(), passes=[ReifyRope()])
    assert [op.kind for op in artifact.ir.ops()].count("apply_rope") == 1
    assert "tract_transformers_apply_rope(" in artifact.graph_nnef
    assert artifact.check().ok


def test_other_rotation_is_left_alone() -> None:
    """concat([x2, -x1]) is the opposite rotation: not tract's rotate_half."""
    artifact = t2n.compile(_Rope(swapped=True), _rope_inputs(), t2n.TractNNEF(), passes=[ReifyRope()])
    assert "apply_rope" not in [op.kind for op in artifact.ir.ops()]
    assert artifact.check().ok


class _Rms(torch.nn.Module):
    def __init__(self, shared: bool) -> None:
        super().__init__()
        self.shared = shared

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        mean = x.pow(2).mean(-1, keepdim=True)
        out = x * torch.rsqrt(mean + 1e-6)
        return (out, mean) if self.shared else (out,)


@pytest.mark.parametrize("shared", [False, True])
def test_rms_norm_pattern(shared: bool) -> None:
    """Rewritten when nothing else reads the mean of squares; kept when the mean is an output."""
    x = torch.randn(2, 3, 16, generator=torch.Generator().manual_seed(1))
    artifact = t2n.compile(_Rms(shared), (x,), t2n.TractNNEF(), passes=[ReifyRmsNorm()])
    kinds = [op.kind for op in artifact.ir.ops()]
    assert ("rms_norm" in kinds) is (not shared)
    assert artifact.check().ok
