"""The export of a language model is checked against ``transformers``' own model (its
forward on the whole sequence without a cache), never against the wrapper t2n traces: a
wrapper that feeds the cache wrongly makes an artifact that agrees with the wrapper and
not with the model, and that export is refused, nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from t2n.errors import CheckMismatchError
from t2n.llm import export_llm, tract_greedy_generate
from t2n.llm.decoder.wrapper import KVCacheWrapper
from t2n.reference.causal_lm import calls, reference_logits, token_ids

from .folders import save_checkpoint
from .tiny_hybrid import tiny_hybrid
from .tiny_models import reference_tokens, tiny_model


def _forgets_past_positions(self: KVCacheWrapper, input_ids: torch.Tensor, *past: torch.Tensor) -> Any:
    """A wrong cache path: every call's positions start at 0, as if the cache were empty
    (the rotary embedding of a decoded token then takes the first position's angles)."""
    from transformers import DynamicCache

    cache = DynamicCache(ddp_cache_data=[(past[2 * i], past[2 * i + 1]) for i in range(len(past) // 2)])
    positions = torch.arange(input_ids.shape[1]).unsqueeze(0)
    out = self.model(input_ids=input_ids, past_key_values=cache, position_ids=positions, use_cache=True,
                     logits_to_keep=self.num_logits_to_keep)
    return (out.logits, *[t for layer in cache.layers for t in (layer.keys, layer.values)])


def test_reference_is_transformers_forward_without_cache() -> None:
    """The reference's rows are the model's own logits: the prefill's last row, then each
    decoded position's, as ``model(ids[:, :end])`` gives them."""
    model = tiny_model("llama")
    steps = calls()
    ids = token_ids(96, steps[-1].end)
    expected = reference_logits(model, ids, steps, keep=1)
    with torch.no_grad():
        full = model(input_ids=torch.as_tensor(ids)).logits.numpy()
    assert [s.name for s in steps] == ["prefill", "decode", "decode_2", "decode_3", "decode_4"]
    for step, rows in zip(steps, expected):
        np.testing.assert_allclose(rows[0, -1], full[0, step.end - 1], atol=1e-5)


def test_wrong_position_offset_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The artifact computes what the broken wrapper computes (the trace is exact), so a
    check against the wrapper passes; against transformers the first decode call is off."""
    monkeypatch.setattr(KVCacheWrapper, "forward", _forgets_past_positions)
    with pytest.raises(CheckMismatchError, match=r"(?s)at the 'decode' call .*position 4 of the sequence.*"
                                                 r"off by .* from transformers' forward") as info:
        export_llm(tiny_model("llama"), tmp_path / "out")
    assert "ok   logits (prefill)" in str(info.value)  # a prompt from an empty cache is right
    assert not (tmp_path / "out").exists()


def test_hybrid_whose_states_are_not_fed_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hybrid model given its cache under a name its forward does not take (what the
    wrapper did on transformers 5.25, where the argument became ``cache``) builds a cache
    of its own: the states fed in are ignored and the export is refused."""
    import t2n.llm.decoder.recurrent_state as recurrent_state

    monkeypatch.setattr(recurrent_state, "cache_keyword", lambda model: "an_ignored_keyword")
    with pytest.raises(CheckMismatchError, match="at the 'decode' call"):
        export_llm(tiny_hybrid("qwen3_next"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_streamed_folder_is_checked_against_the_loaded_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """From a folder, the reference is the checkpoint loaded with transformers (the graph's
    weights stream from the shards): the same refusal."""
    folder = save_checkpoint(tiny_model("qwen2"), tmp_path / "ckpt", tokenizer=False)
    monkeypatch.setattr(KVCacheWrapper, "forward", _forgets_past_positions)
    with pytest.raises(CheckMismatchError, match="at the 'decode' call"):
        export_llm(folder, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kv_cache", ["stateful", "explicit"])
def test_right_wrapper_passes_and_generates(kv_cache: str, tmp_path: Path) -> None:
    model = tiny_model("gemma2")  # a sliding window (4) shorter than the checked sequence
    export_llm(model, tmp_path / "out", kv_cache=kv_cache, num_logits_to_keep=None)
    prompt = torch.randint(1, 96, (1, 5), generator=torch.Generator().manual_seed(3))
    assert tract_greedy_generate(tmp_path / "out", prompt, 8) == reference_tokens(model, prompt, 8)


@pytest.mark.parametrize("family", ["gemma3", "qwen2_5_vl"])
def test_multimodal_decoder_that_drops_the_image_is_refused(family: str, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A decoder wrapper that leaves the placeholders' own embeddings instead of writing the
    encoder's rows there: decoder and encoder agree with the wrappers, not with the model's
    forward on the pixel values."""
    import t2n.llm.multimodal.wrappers as wrappers

    from .tiny_multimodal import CASES

    monkeypatch.setattr(wrappers, "scatter_at_placeholders", lambda embeds, mask, rows: embeds)
    with pytest.raises(CheckMismatchError, match=r"(?s)at the 'prefill' call .*forward on the whole sequence"):
        export_llm(CASES[family]().model, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_multimodal_decoder_with_a_wrong_cache_path_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    """The decoder wrapper hands the model its cache under a name the model does not take
    (what a release renaming the argument does): the model starts a cache of its own at
    each call, so the prefill with the image is right and the first one-token call is not."""
    import t2n.llm.multimodal.wrappers as wrappers

    from .tiny_multimodal import CASES

    monkeypatch.setattr(wrappers, "cache_keyword", lambda model: "an_ignored_keyword")
    with pytest.raises(CheckMismatchError, match=r"(?s)at the 'decode' call .*ok   logits \(prefill\)"):
        export_llm(CASES["idefics3"]().model, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_options_object_is_what_export_llm_makes(tmp_path: Path) -> None:
    """``export_llm``'s keywords become one ``LLMExportOptions``, checked before anything is
    written; ``export_with_options`` takes it as it is."""
    from t2n.errors import InvalidArgumentError
    from t2n.llm import LLMExportOptions, export_with_options

    opts = LLMExportOptions(kv_cache="stateful", num_logits_to_keep=0)
    assert opts.kept_logits is None and opts.forms().stateful and opts.target().version
    model = tiny_model("llama")
    path = export_with_options(model, tmp_path / "out", opts)
    assert path.is_file()
    with pytest.raises(InvalidArgumentError, match="kv_cache must be one of"):
        export_with_options(model, tmp_path / "bad", LLMExportOptions(kv_cache="paged"))
    assert not (tmp_path / "bad").exists()
