"""Checkpoint folders exported without loading them: the model is built on the meta
device and every weight streams from the shards. What tract computes from such an
artifact must be what the fully loaded model computes in PyTorch."""

from __future__ import annotations

import json
import logging
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import t2n.llm.common.streaming as streaming
from t2n.llm import export_llm, tract_greedy_generate
from t2n.llm.common.generate import load_runnable
from t2n.llm.decoder.wrapper import KVCacheWrapper, cache_layout

from .folders import export_memory_growth, save_checkpoint
from .tiny_models import reference_tokens, tiny_model

PROMPT = torch.randint(1, 96, (1, 5), generator=torch.Generator().manual_seed(3))


@pytest.fixture
def no_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every checkpoint counts as bigger than memory: PyTorch never loads it."""
    monkeypatch.setattr(streaming, "REFERENCE_MEMORY_FRACTION", 0.0)


def _loaded(folder: Path, dtype: torch.dtype | None = None) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype or "auto").eval()


def _tract_prefill(out: Path, model: Any) -> tuple[list[np.ndarray], tuple[torch.Tensor, ...]]:
    """tract's outputs for the prompt and an empty cache, and PyTorch's on ``model``."""
    import tract

    from t2n.backends.tract.child import numpy_of

    layout = cache_layout(model)
    cache = layout.empty_cache(0)
    runnable = load_runnable(out / "model" / "model.nnef.tgz")
    got = [numpy_of(tract, np, o) for o in runnable.run([PROMPT.numpy(), *(c.numpy() for c in cache)])]
    with torch.no_grad():
        expected = KVCacheWrapper(model, 1)(PROMPT, *cache)  # the export keeps the last logits
    return got, expected


def _assert_same_as_loaded(out: Path, model: Any, atol: float = 1e-4) -> None:
    got, expected = _tract_prefill(out, model)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g.astype(np.float32), e.float().numpy(), atol=atol, rtol=1e-3)
    assert tract_greedy_generate(out, PROMPT, 16) == reference_tokens(model, PROMPT, 16)


@pytest.mark.parametrize("family", ["llama", "gemma3", "gpt2", "qwen3"])
def test_streamed_export_computes_what_the_loaded_model_computes(
        family: str, no_reference: None, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # gemma3: computed embedding scale and two rotary tables; gpt2: learned positions
    folder = save_checkpoint(tiny_model(family), tmp_path / "ck")
    with caplog.at_level(logging.WARNING, logger="t2n.llm.common.streaming"):
        export_llm(folder, tmp_path / "out")
    assert "not verified" in caplog.text and str(folder) in caplog.text
    assert json.loads((tmp_path / "out" / "modes.json").read_text())["tests"] == []
    assert not (tmp_path / "out" / "tests").exists()
    _assert_same_as_loaded(tmp_path / "out", _loaded(folder))


def _dat_files(out: Path) -> list[str]:
    with tarfile.open(out / "model" / "model.nnef.tgz") as tgz:
        return sorted(n for n in tgz.getnames() if n.endswith(".dat"))


def _graph(out: Path) -> str:
    with tarfile.open(out / "model" / "model.nnef.tgz") as tgz:
        member = tgz.extractfile("graph.nnef")
        assert member is not None
        return member.read().decode()


def test_tied_embeddings_written_once(no_reference: None, tmp_path: Path) -> None:
    model = tiny_model("gpt2")
    assert model.lm_head.weight is model.transformer.wte.weight
    export_llm(save_checkpoint(model, tmp_path / "ck"), tmp_path / "out")
    dats = _dat_files(tmp_path / "out")
    assert [d for d in dats if "wte" in d or "lm_head" in d] == ["model.transformer.wte.weight.dat"]
    graph = _graph(tmp_path / "out")
    declared = [line for line in graph.splitlines() if "model.transformer.wte.weight" in line]
    assert len(declared) == 1, declared  # one variable...
    variable = declared[0].split("=")[0].strip()
    assert sum(line.count(variable) for line in graph.splitlines()) >= 3  # ...read twice


@pytest.mark.parametrize(("saved", "dtype", "written"), [
    (torch.bfloat16, "f16", "float16"), (torch.bfloat16, "f32", "float32"),
    (torch.bfloat16, None, "float16"), (torch.float16, None, "float16"),
])
def test_half_checkpoints(saved: torch.dtype, dtype: str | None, written: str, no_reference: None,
                          tmp_path: Path) -> None:
    folder = save_checkpoint(tiny_model("llama").to(saved), tmp_path / "ck")
    export_llm(folder, tmp_path / "out", dtype=dtype)
    assert json.loads((tmp_path / "out" / "modes.json").read_text())["cache"]["dtype"] == written
    reference = _loaded(folder, torch.float32 if written == "float32" else torch.float16)
    got, expected = _tract_prefill(tmp_path / "out", reference)
    assert got[0].dtype == np.dtype(written)
    tolerance = 1e-4 if written == "float32" else 2e-2
    np.testing.assert_allclose(got[0].astype(np.float32), expected[0].float().numpy(), atol=tolerance)


def test_verified_when_it_fits(tmp_path: Path) -> None:
    folder = save_checkpoint(tiny_model("qwen2"), tmp_path / "ck")
    export_llm(folder, tmp_path / "out", dtype="f16", tract_check_io_tolerance="very")
    modes = json.loads((tmp_path / "out" / "modes.json").read_text())
    assert modes["tests"] == ["tests/prefill.npz", "tests/decode.npz", "tests/io.npz"]
    prefill = np.load(tmp_path / "out" / "tests" / "prefill.npz")
    assert prefill["outputs"].dtype == np.float16  # PyTorch's outputs of the loaded f16 model


def test_streamed_q4_0_is_the_in_memory_q4_0(no_reference: None, tmp_path: Path) -> None:
    model = tiny_model("llama")
    folder = save_checkpoint(model, tmp_path / "ck")
    export_llm(folder, tmp_path / "streamed", compression="min_max_q4_0_with_embeddings")
    export_llm(model, tmp_path / "loaded", compression="min_max_q4_0_with_embeddings")
    streamed, loaded = _dat_bytes(tmp_path / "streamed"), _dat_bytes(tmp_path / "loaded")
    assert list(streamed) == list(loaded)
    for name in streamed:
        assert streamed[name] == loaded[name], name  # same Q4_0 blocks (and float tensors)
    from t2n.quant.q4_0 import is_q4_0_header

    assert is_q4_0_header(streamed["model.model.embed_tokens.weight.dat"][:128])


def _dat_bytes(out: Path) -> dict[str, bytes]:
    with tarfile.open(out / "model" / "model.nnef.tgz") as tgz:
        return {m.name: tgz.extractfile(m).read() for m in tgz.getmembers()  # type: ignore[union-attr]
                if m.name.endswith(".dat")}


def test_buffer_the_code_does_not_compute(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import transformers as tf

    from t2n.errors import CheckpointFolderError

    folder = save_checkpoint(tiny_model("llama"), tmp_path / "ck")
    monkeypatch.setattr(tf.LlamaPreTrainedModel, "_init_weights", lambda self, module: None)
    with pytest.raises(CheckpointFolderError, match=r"rotary_emb\.inv_freq.*export the loaded model"):
        export_llm(folder, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_peak_memory_is_a_small_fraction_of_the_checkpoint(tmp_path: Path) -> None:
    import transformers as tf

    torch.manual_seed(0)
    config = tf.LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1536, num_hidden_layers=8,
                            num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=512)
    big = save_checkpoint(tf.LlamaForCausalLM(config), tmp_path / "big", tokenizer=False)
    warm = save_checkpoint(tiny_model("llama"), tmp_path / "warm", tokenizer=False)
    size = sum(p.stat().st_size for p in big.glob("*.safetensors"))
    growth = export_memory_growth(big, tmp_path / "out", warm)
    assert size > 190e6
    # a fixed cost (one 64 MiB read chunk of the shard), not a share of the weights:
    # the 3.4 GB checkpoint of benchmarks/llm_export.py stays within a few percent
    assert growth < 72 << 20, (growth, size)
    assert growth < 0.3 * size, (growth, size)
