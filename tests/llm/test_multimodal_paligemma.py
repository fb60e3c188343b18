"""PaliGemma and PaliGemma 2: the prompt (image tokens first, then text; the processor's
``token_type_ids`` 0) attends both ways on the first call, later calls causally, positions
from 1. The decoder computes that mask from the call's sizes (the past length 0 or not),
so both cache forms, explicit and stateful, generate transformers' tokens; from an object
and from its checkpoint folder (streamed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import t2n.llm
from t2n.errors import InvalidArgumentError
from t2n.llm import export_llm
from t2n.llm.multimodal.generate import tract_encode_images, tract_multimodal_generate

from .tiny_multimodal import paligemma

pytestmark = pytest.mark.slow  # tiny models exported and run in tract: CI's second step

NEW_TOKENS = 8


@pytest.mark.parametrize("kv_cache", ["explicit", "stateful"])
@pytest.mark.parametrize("version", [1, 2])
def test_paligemma_generates_with_its_prefix_in_both_cache_forms(version: int, kv_cache: str,
                                                                 tmp_path: Path) -> None:
    case = paligemma(version=version)
    out = tmp_path / "out"
    export_llm(case.model, out, kv_cache=kv_cache)  # checked against the model's forward (token_type_ids)
    modes = json.loads((out / "decoder" / "modes.json").read_text())
    assert modes["prefix"]["first_call"] == "both ways" and modes["cache"]["form"] == kv_cache
    pixels = case.pixels[0].numpy()
    expected = case.reference_tokens(case.image_prompt, NEW_TOKENS, with_image=True)
    assert len(set(expected)) > 3
    assert tract_multimodal_generate(out, case.image_prompt, NEW_TOKENS, pixels) == expected
    assert tract_multimodal_generate(out, case.text_prompt, NEW_TOKENS) == \
        case.reference_tokens(case.text_prompt, NEW_TOKENS, with_image=False)

    # two images (their tokens first, one after the other), encoded in one call each
    images = torch.cat([case.pixels[0], torch.randn((1, 3, 28, 28), generator=torch.Generator().manual_seed(8))])
    prompt = torch.tensor([[*[90] * 32, *case.image_prompt[0, 16:].tolist()]])
    config = {"max_new_tokens": NEW_TOKENS, "do_sample": False, "pad_token_id": 0}
    case.model.generation_config.eos_token_id = None  # greedy choices all along, as tract's generation makes them
    with torch.no_grad():
        both = case.model.generate(prompt, attention_mask=torch.ones_like(prompt), pixel_values=images,
                                   token_type_ids=torch.zeros_like(prompt), **config)[0, prompt.shape[1]:].tolist()
    rows = tract_encode_images(out, [(images[i:i + 1].numpy(), None) for i in range(2)])
    assert tract_multimodal_generate(out, prompt, NEW_TOKENS, rows=rows) == both
    processed = {"input_ids": prompt, "attention_mask": torch.ones_like(prompt), "pixel_values": images,
                 "token_type_ids": torch.zeros_like(prompt)}  # what the processor returns
    assert t2n.llm.generate(out, processed, NEW_TOKENS) == both
    with pytest.raises(InvalidArgumentError, match="suffix"):
        t2n.llm.generate(out, {**processed, "token_type_ids": (prompt == 1).long()}, NEW_TOKENS)


def test_the_prefix_matters_and_a_folder_streams(tmp_path: Path) -> None:
    """The reference differs when the prompt is read causally (so the tests above see the
    mask), and PaliGemma 2's checkpoint folder exports streamed to the same tokens."""
    case = paligemma(version=2)
    prompt = case.image_prompt
    case.model.generation_config.eos_token_id = None
    causal = case.model.generate(prompt, attention_mask=torch.ones_like(prompt), pixel_values=case.pixels[0],
                                 max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0)[0, prompt.shape[1]:]
    expected = case.reference_tokens(prompt, NEW_TOKENS, with_image=True)
    assert causal.tolist() != expected
    case.model.save_pretrained(tmp_path / "checkpoint")
    export_llm(tmp_path / "checkpoint", tmp_path / "out", kv_cache="stateful")
    assert tract_multimodal_generate(tmp_path / "out", prompt, NEW_TOKENS, case.pixels[0].numpy()) == expected
