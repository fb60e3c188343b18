"""``merge_peft`` for vision-language models: a LoRA adapter (on the decoder's and the
vision tower's attention projections) merged into the weights before export, from a
model object or from a checkpoint folder (loaded whole to merge, not streamed); tract
then generates the merged model's tokens."""

from __future__ import annotations

import copy
from pathlib import Path

import torch

from t2n.llm import export_llm
from t2n.llm.multimodal.generate import tract_multimodal_generate

from .tiny_multimodal import CASES

NEW_TOKENS = 8


def _adapter(model: torch.nn.Module, folder: Path) -> Path:
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(1)  # init_lora_weights=False: random factors, so the merge changes the model
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(copy.deepcopy(model), config).save_pretrained(str(folder))
    return folder


def _q_proj(model: torch.nn.Module) -> torch.Tensor:
    return next(p for n, p in model.named_parameters() if n.endswith("layers.0.self_attn.q_proj.weight")).detach().clone()


def test_adapter_merged_into_a_vision_language_model(tmp_path: Path) -> None:
    case = CASES["gemma3"]()
    case.model.save_pretrained(tmp_path / "base")
    adapter = _adapter(case.model, tmp_path / "adapter")
    before = _q_proj(case.model)
    pixels = [p.numpy() for p in case.pixels]

    export_llm(case.model, tmp_path / "object", merge_peft=adapter)  # merges into the object given
    assert not torch.equal(_q_proj(case.model), before)
    merged_tokens = case.reference_tokens(case.image_prompt, NEW_TOKENS, with_image=True)  # not the base's
    assert tract_multimodal_generate(tmp_path / "object", case.image_prompt, NEW_TOKENS, *pixels) == merged_tokens

    export_llm(tmp_path / "base", tmp_path / "folder", merge_peft=adapter)
    assert tract_multimodal_generate(tmp_path / "folder", case.image_prompt, NEW_TOKENS, *pixels) == merged_tokens
