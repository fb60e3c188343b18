"""One ``t2n.llm.generate`` for every folder ``t2n llm`` writes — text, multimodal,
encoder-decoder — from the dict a tokenizer or processor returns, compared with the
tokens the ``transformers`` model's own ``generate`` gives (greedy)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import t2n.llm
from t2n.errors import InvalidArgumentError

from .tiny_models import tiny_model
from .tiny_multimodal import CASES
from .tiny_seq2seq import source, tiny_seq2seq

pytestmark = pytest.mark.slow  # tiny models exported and run in tract: CI's second step

NEW_TOKENS = 8


@pytest.mark.parametrize("kv_cache", ["explicit", "stateful"])
def test_one_generate_for_text_multimodal_and_encoder_decoder_exports(kv_cache: str, tmp_path: Path) -> None:
    llama = tiny_model("llama")
    prompt = torch.tensor([[1, 5, 9, 14, 3]])
    text = {"input_ids": prompt, "attention_mask": torch.ones_like(prompt)}
    expected = llama.generate(**text, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
                              pad_token_id=0)[0, prompt.shape[1]:].tolist()
    t2n.llm.export_llm(llama, tmp_path / "text", kv_cache=kv_cache)
    assert t2n.llm.generate(tmp_path / "text", text, NEW_TOKENS) == expected

    case = CASES["llava"]()  # two images, as a processor gives them: pixel_values [2, 3, H, W]
    pixels = torch.randn((2, 3, 28, 28), generator=torch.Generator().manual_seed(5))
    ids = torch.tensor([[2, 5, *[90] * 16, 7, *[90] * 16, 8]])
    images = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "pixel_values": pixels}
    expected = case.model.generate(**images, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                                   do_sample=False, pad_token_id=0)[0, ids.shape[1]:].tolist()
    t2n.llm.export_llm(case.model, tmp_path / "llava", kv_cache=kv_cache)
    assert t2n.llm.generate(tmp_path / "llava", {k: v.numpy() for k, v in images.items()}, NEW_TOKENS) == expected

    bart = tiny_seq2seq("bart")  # export_llm hands an encoder-decoder to t2n.llm.seq2seq
    inputs = source("bart")
    with torch.no_grad():
        generated = bart.generate(**inputs, do_sample=False, num_beams=1, max_new_tokens=NEW_TOKENS)[0].tolist()
    t2n.llm.export_llm(bart, tmp_path / "bart", kv_cache=kv_cache)
    assert (tmp_path / "bart" / "seq2seq.json").is_file()
    ours = t2n.llm.generate(tmp_path / "bart", inputs, NEW_TOKENS)
    assert ours == generated[1:] and len(set(ours)) >= 3  # after BART's one start token


def test_generate_refuses_what_a_folder_does_not_take(tmp_path: Path) -> None:
    t2n.llm.export_llm(tiny_model("llama"), tmp_path / "text")
    ids = np.array([[1, 5, 9]])
    with pytest.raises(InvalidArgumentError, match="takes input_ids only, not pixel_values"):
        t2n.llm.generate(tmp_path / "text", {"input_ids": ids, "pixel_values": np.zeros((1, 3, 4, 4))}, 2)
    with pytest.raises(InvalidArgumentError, match="padded prompt"):
        t2n.llm.generate(tmp_path / "text", {"input_ids": ids, "attention_mask": np.array([[0, 1, 1]])}, 2)
    with pytest.raises(InvalidArgumentError, match=r"one prompt, \[1, S\]"):
        t2n.llm.generate(tmp_path / "text", {"input_ids": np.concatenate([ids, ids])}, 2)
    with pytest.raises(InvalidArgumentError, match="no seq2seq.json, multimodal.json or modes.json"):
        t2n.llm.generate(tmp_path, {"input_ids": ids}, 2)
