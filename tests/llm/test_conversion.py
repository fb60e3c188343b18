"""A checkpoint folder's tensors, converted as ``from_pretrained`` converts them on load
(per-expert weights stacked and fused, renamed output embeddings), without loading
it: every tensor equals the loaded model's, byte for byte, read whole or in small
chunks."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from t2n.ir import ArrayData
from t2n.llm.common.conversion import _convert
from t2n.llm.common.streaming import meta_model

from .folders import save_checkpoint
from .tiny_models import MOE_FAMILIES, tiny_model


def _bytes(t: torch.Tensor) -> np.ndarray:
    return t.detach().contiguous().view(torch.uint8).numpy()


@pytest.mark.parametrize("family", [*MOE_FAMILIES, "gpt_neox"])
def test_converted_tensors_are_the_loaded_models(family: str, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    folder = save_checkpoint(tiny_model(family), tmp_path / "ck", tokenizer=False)
    model, shards = meta_model(folder, dtype=None, trust_remote_code=False)
    state = AutoModelForCausalLM.from_pretrained(str(folder)).state_dict()
    assert set(state) - set(shards.tensors) <= {"lm_head.weight"} | {n for n in state if "inv_freq" in n}
    fused = [n for n in shards.tensors if n.endswith(("gate_up_proj", "down_proj")) and "experts" in n]
    assert len(fused) == (0 if family == "gpt_neox" else 2 if family == "deepseek_v3" else 4)
    for name, data in shards.tensors.items():
        expected = _bytes(state[name])
        assert np.array_equal(np.ascontiguousarray(data.raw()).reshape(-1).view(np.uint8), expected.reshape(-1)), name
        chunks = np.concatenate([c.reshape(-1) for c in data.iter_chunks(100)])
        assert np.array_equal(chunks.view(np.uint8), expected.reshape(-1)), name


def test_other_conversions_run_transformers_operations() -> None:
    """A conversion that is not a stack, concatenation or chunk (here a transpose after
    the stack) runs transformers' own operations on the group when it is read."""
    from transformers.core_model_loading import Chunk, MergeModulelist, Transpose, WeightConverter

    g = torch.Generator().manual_seed(0)
    parts = [torch.randn(3, 5, generator=g) for _ in range(4)]
    data = [ArrayData(p.numpy()) for p in parts]
    stacked = WeightConverter("x.*.w", "x.w", operations=[MergeModulelist(dim=0), Transpose(1, 2)])
    out = _convert(stacked, {stacked.source_patterns[0]: data}, "model.x.w", model=SimpleNamespace(config=None))
    assert list(out) == ["model.x.w"] and out["model.x.w"].shape == (4, 5, 3)
    assert np.array_equal(out["model.x.w"].raw(), torch.stack(parts).transpose(1, 2).numpy())

    split = WeightConverter("qkv", ["q", "k", "v"], operations=[Chunk(dim=0)])
    fused = torch.randn(9, 4, generator=g)
    out = _convert(split, {"qkv": [ArrayData(fused.numpy())]}, "model.a.q.weight", model=SimpleNamespace(config=None))
    assert list(out) == ["model.a.q.weight", "model.a.k.weight", "model.a.v.weight"]
    for got, want in zip(out.values(), fused.chunk(3)):
        assert np.array_equal(np.concatenate(list(got.iter_chunks(16))), want.numpy().reshape(-1))
