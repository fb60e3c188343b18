"""Mixture-of-experts language models generate in tract what transformers generates
(greedy, 16 tokens), from a model object and from a checkpoint folder streamed without
loading it, in f32, f16 and with Q4_0 experts; their sparse blocks run as tract's
``tract_moe_ffn`` (DeepSeek-V3's grouped router keeps its operations, its experts the
standard form)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
import torch

from t2n.llm import export_llm, tract_greedy_generate

from .folders import save_checkpoint
from .tiny_hybrid import tiny_hybrid
from .tiny_models import MOE_FAMILIES, reference_tokens, tiny_model

NEW_TOKENS = 16
FUSED = tuple(f for f in MOE_FAMILIES if f != "deepseek_v3")


def _prompt() -> torch.Tensor:
    return torch.randint(1, 96, (1, 5), generator=torch.Generator().manual_seed(3))


def _graph(out: Path) -> str:
    with tarfile.open(out / "model" / "model.nnef.tgz") as tar:
        return tar.extractfile("graph.nnef").read().decode()  # type: ignore[union-attr]


def _members(out: Path) -> dict[str, bytes]:
    with tarfile.open(out / "model" / "model.nnef.tgz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def _generates_like(model: torch.nn.Module, out: Path) -> None:
    prompt = _prompt()
    assert tract_greedy_generate(out, prompt, NEW_TOKENS) == reference_tokens(model, prompt, NEW_TOKENS)


@pytest.mark.parametrize("family", MOE_FAMILIES)
def test_moe_family_generates_identically(family: str, tmp_path: Path) -> None:
    model = tiny_model(family)
    export_llm(model, tmp_path / "out")
    graph = _graph(tmp_path / "out")
    assert ("tract_moe_ffn(" in graph) == (family in FUSED)
    _generates_like(model, tmp_path / "out")


@pytest.fixture
def never_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder's model is never loaded in PyTorch by the export."""
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the checkpoint was loaded")

    monkeypatch.setattr("t2n.llm.common.checkpoint.load_folder", refuse)
    monkeypatch.setattr("t2n.llm.common.streaming.reference_model", refuse)


@pytest.mark.parametrize("family", [pytest.param(f, marks=pytest.mark.slow) if f in ("olmoe", "granitemoe", "qwen3_moe")
                                    else f for f in MOE_FAMILIES])
def test_moe_family_from_folder_streamed(family: str, tmp_path: Path, never_loaded: None) -> None:
    """The checkpoint holds per-expert tensors (save_pretrained writes them so); they are
    stacked into the fused experts while streaming."""
    model = tiny_model(family)
    folder = save_checkpoint(model, tmp_path / "ck", tokenizer=False)
    export_llm(folder, tmp_path / "out", verify=False)
    _generates_like(model, tmp_path / "out")


@pytest.mark.parametrize("family", ["mixtral", "qwen2_moe", "gpt_oss"])
def test_moe_f16_generates_identically(family: str, tmp_path: Path) -> None:
    model = tiny_model(family).to(torch.float16)
    export_llm(model, tmp_path / "out", tract_check_io_tolerance="very")
    _generates_like(model, tmp_path / "out")


@pytest.mark.parametrize("family", ["mixtral", "gpt_oss"])
def test_moe_f16_from_folder_streamed(family: str, tmp_path: Path, never_loaded: None) -> None:
    model = tiny_model(family)
    folder = save_checkpoint(model, tmp_path / "ck", tokenizer=False)
    export_llm(folder, tmp_path / "out", dtype="f16", verify=False)
    _generates_like(model.to(torch.float16), tmp_path / "out")


def test_q4_0_experts(tmp_path: Path) -> None:
    """The experts are 4-bit blocks tract's operator runs; from a folder they are the
    same bytes as from the model quantized in memory."""
    from t2n.quant.q4_0 import is_q4_0_header

    model = tiny_model("mixtral")
    folder = save_checkpoint(model, tmp_path / "ck", tokenizer=False)
    export_llm(model, tmp_path / "out", compression="min_max_q4_0")  # the model is quantized in place
    members = _members(tmp_path / "out")
    experts = [n for n in members if ".experts." in n]
    assert len(experts) == 6 and all(is_q4_0_header(members[n][:128]) for n in experts)
    _generates_like(model, tmp_path / "out")
    export_llm(folder, tmp_path / "streamed", compression="min_max_q4_0", verify=False)
    streamed = _members(tmp_path / "streamed")
    assert {n: streamed[n] for n in experts} == {n: members[n] for n in experts}


@pytest.mark.parametrize("family", ["gptj", "gpt_neox"])
def test_dense_family_from_folder_streamed(family: str, tmp_path: Path, never_loaded: None) -> None:
    """GPT-J (its rotary table computed, not in the shards) and GPT-NeoX (``embed_out``
    in the checkpoint, ``lm_head`` in the model)."""
    model = tiny_model(family)
    folder = save_checkpoint(model, tmp_path / "ck", tokenizer=False)
    export_llm(folder, tmp_path / "out", verify=False)
    _generates_like(model, tmp_path / "out")


HYBRID_EXPERTS = {
    "qwen3_next": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                       shared_expert_intermediate_size=64),
    "jamba": dict(num_experts=4, num_experts_per_tok=2, expert_layer_period=2, expert_layer_offset=1),
}


@pytest.mark.parametrize("family", sorted(HYBRID_EXPERTS))
def test_hybrid_with_experts_generates_identically(family: str, tmp_path: Path) -> None:
    """Qwen3-Next and Jamba as published: recurrent layers beside attention, and sparse
    feed-forward blocks, written as tract's operator beside the recurrent states."""
    model = tiny_hybrid(family, **HYBRID_EXPERTS[family])
    export_llm(model, tmp_path / "out")
    assert _graph(tmp_path / "out").count("tract_moe_ffn(") == {"qwen3_next": 4, "jamba": 2}[family]
    _generates_like(model, tmp_path / "out")
