"""Multimodal decoders with tract's stateful KV cache (``kv_cache="stateful"`` and the
quantized forms): the decoder takes ``input_ids`` and the encoder's rows, tract keeps
the keys and values, and generating in one tract state gives, with an image and
without, the tokens of transformers' ``generate(do_sample=False)``. The Qwens keep their
rotary shift an input and an output, fed back from call to call beside the state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from t2n.llm import export_llm
from t2n.llm.multimodal.generate import tract_multimodal_generate

from .tiny_multimodal import CASES

NEW_TOKENS = 8


def _generates_as_transformers(case: Any, out: Path) -> None:
    """Greedy tokens in one tract state, with the image and text only, are transformers'."""
    pixels = [p.numpy() for p in case.pixels]
    assert tract_multimodal_generate(out, case.image_prompt, NEW_TOKENS, *pixels) == \
        case.reference_tokens(case.image_prompt, NEW_TOKENS, with_image=True)
    assert tract_multimodal_generate(out, case.text_prompt, NEW_TOKENS) == \
        case.reference_tokens(case.text_prompt, NEW_TOKENS, with_image=False)


@pytest.mark.parametrize("family", ["gemma3", "idefics3"])
def test_stateful_decoder_generates_as_transformers(family: str, tmp_path: Path) -> None:
    case = CASES[family]()
    out = tmp_path / "out"
    export_llm(case.model, out, kv_cache="stateful")
    manifest = json.loads((out / "multimodal.json").read_text())
    modes = json.loads((out / manifest["decoder"]["modes"]).read_text())
    assert modes["cache"]["form"] == "stateful" and modes["cache"]["states"][0] == "cache_key_0"
    assert modes["inputs"] == ["input_ids", "in_image_embeddings"] and modes["outputs"] == ["outputs"]
    assert modes["tests"] == ["tests/prefill.npz", "tests/decode.npz"]
    assert sorted(np.load(out / "decoder" / "tests" / "prefill.npz").files) == \
        ["in_image_embeddings", "input_ids", "outputs"]
    _generates_as_transformers(case, out)


def test_int8_stateful_decoder_generates_with_an_image(tmp_path: Path) -> None:
    """The prefill and a decode step checked in tract at the 'very' tolerance (verify)."""
    case = CASES["gemma3"]()
    export_llm(case.model, tmp_path / "out", kv_cache="stateful_int8")
    modes = json.loads((tmp_path / "out" / "decoder" / "modes.json").read_text())
    assert modes["cache"]["form"] == "stateful" and modes["cache"]["quantized_bits"] == 8
    pixels = [p.numpy() for p in case.pixels]
    assert tract_multimodal_generate(tmp_path / "out", case.image_prompt, NEW_TOKENS, *pixels) == \
        case.reference_tokens(case.image_prompt, NEW_TOKENS, with_image=True)


@pytest.mark.parametrize("family", ["qwen2_5_vl", "qwen3_vl"])
def test_qwen_stateful_decoder_feeds_its_rotary_shift_back(family: str, tmp_path: Path) -> None:
    case = CASES[family]()
    out = tmp_path / "out"
    export_llm(case.model, out, kv_cache="stateful")
    modes = json.loads((out / "decoder" / "modes.json").read_text())
    assert modes["cache"]["form"] == "stateful"
    assert modes["inputs"][:3] == ["input_ids", "in_rope_delta", "in_image_embeddings"]
    assert modes["inputs"][-1] == "in_image_positions"
    assert modes["outputs"] == ["outputs", "out_rope_delta"]
    assert not any(n.startswith(("in_cache", "out_cache")) for n in modes["inputs"] + modes["outputs"])
    prefill = np.load(out / "decoder" / "tests" / "prefill.npz")
    assert sorted(prefill.files) == sorted([*modes["inputs"], *modes["outputs"]])  # the shift after the call too
    _generates_as_transformers(case, out)


def test_stateful_decoder_from_a_streamed_folder(tmp_path: Path) -> None:
    """A folder's weights stream into the stateful decoder, checked against the loaded model."""
    case = CASES["gemma3"]()
    case.model.save_pretrained(tmp_path / "checkpoint")
    export_llm(tmp_path / "checkpoint", tmp_path / "out", kv_cache="stateful")
    assert json.loads((tmp_path / "out" / "decoder" / "modes.json").read_text())["cache"]["form"] == "stateful"
    pixels = [p.numpy() for p in case.pixels]
    assert tract_multimodal_generate(tmp_path / "out", case.image_prompt, NEW_TOKENS, *pixels) == \
        case.reference_tokens(case.image_prompt, NEW_TOKENS, with_image=True)
