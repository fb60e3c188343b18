"""Qwen2-Audio exported as encoder + decoder: its encoder takes the processor's clips padded
to 30 s (``input_features``) and their ``feature_attention_mask``, masks the tower's
attention beyond each clip's real frames as the model does and returns only the rows of
those frames (a length tract computes from the mask), so a clip gives exactly the rows the
model writes at its placeholders. Generation in tract from the processor's tensors gives
the tokens of transformers' ``generate(do_sample=False)``, text only, with one clip and
with two clips of different lengths (one filling the 30 s) encoded in one call, in both
cache forms; what the export does not take is refused with a typed error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import t2n.llm
from t2n.errors import InvalidArgumentError
from t2n.llm.multimodal.generate import (
    tract_encode_all,
    tract_encode_images,
    tract_multimodal_generate,
)

from .test_graph_names import _agrees, _declared
from .test_schema_driver import drive
from .tiny_multimodal import audio_rows, clips, decoder_rows, qwen2_audio

pytestmark = pytest.mark.slow  # a tiny model exported twice and run in tract: CI's second step

NEW_TOKENS = 8
TEXT = [2, 5, 7, 8, 11]


def _prompts() -> dict[str, dict[str, torch.Tensor]]:
    """The processor's dicts: text only, one clip of 20 real frames (5 tokens), two clips
    of 32 (the whole 30 s: 8 tokens) and 13 frames (3 tokens)."""
    one_features, one_mask = clips([20], seed=5)
    two_features, two_mask = clips([32, 13], seed=6)
    prompts = {
        "text only": {"input_ids": torch.tensor([TEXT])},
        "one clip": {"input_ids": torch.tensor([[2, 5, 91, *[90] * audio_rows(20), 92, 7, 8]]),
                     "input_features": one_features, "feature_attention_mask": one_mask},
        "two clips": {"input_ids": torch.tensor([[2, 91, *[90] * audio_rows(32), 92, 5, 91,
                                                  *[90] * audio_rows(13), 92, 7]]),
                      "input_features": two_features, "feature_attention_mask": two_mask}}
    for given in prompts.values():
        given["attention_mask"] = torch.ones_like(given["input_ids"])
    return prompts


def _transformers_tokens(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> list[int]:
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                             do_sample=False, pad_token_id=0)
    return [int(t) for t in out[0, inputs["input_ids"].shape[1]:]]


def _tract_tokens(out: Path, inputs: dict[str, torch.Tensor]) -> list[int]:
    """``t2n.llm.generate`` on what the processor gives (features and mask: one encoder call
    per clip, the rows in order); with both clips in one encoder call too, the same tokens."""
    given = {k: v.numpy() for k, v in inputs.items()}
    tokens = t2n.llm.generate(out, given, NEW_TOKENS)
    if "input_features" in given:
        rows = tract_encode_images(out, [((given["input_features"], given["feature_attention_mask"]), None)],
                                   modality="audio")
        assert tract_multimodal_generate(out, given["input_ids"], NEW_TOKENS, modality="audio", rows=rows) == tokens
    return tokens


@pytest.mark.parametrize("kv_cache", ["explicit", "stateful"])
def test_qwen2_audio_generates_transformers_tokens(kv_cache: str, tmp_path: Path) -> None:
    model = qwen2_audio().model
    out = tmp_path / "out"
    t2n.llm.export_llm(model, out, kv_cache=kv_cache)
    _manifest_says_the_rows(out)
    prompts = _prompts()

    # the encoder on clips it was not traced on: the rows the model's forward writes at the audio tokens
    two = prompts["two clips"]
    rows = tract_encode_all(out, two["input_features"].numpy(), two["feature_attention_mask"].numpy(),
                            modality="audio")
    assert rows[0].shape == (audio_rows(32) + audio_rows(13), 64)
    np.testing.assert_allclose(rows[0], decoder_rows(model, two, 90).numpy(), rtol=1e-4, atol=1e-4)

    for name, inputs in prompts.items():
        expected = _transformers_tokens(model, inputs)
        assert len(set(expected)) > 3, name
        if name == "one clip":  # a runtime written from the manifests alone (tests/llm/test_schema_driver.py)
            raw = [v.numpy() for k, v in inputs.items() if k not in ("input_ids", "attention_mask")]
            assert drive(out, inputs["input_ids"].numpy(), raw, NEW_TOKENS) == expected
        assert _tract_tokens(out, inputs) == expected, name
    _refusals(out, prompts["one clip"])


def _refusals(out: Path, clip: dict[str, torch.Tensor]) -> None:
    """What the export does not take, refused with a typed error saying what to do."""
    given = {k: v.numpy() for k, v in clip.items()}
    features, mask = given["input_features"], given["feature_attention_mask"]
    rows = tract_encode_all(out, features, mask, modality="audio")
    # a clip without its placeholders in the prompt
    with pytest.raises(InvalidArgumentError, match=r"0 placeholder token\(s\) \(id 90\) but the encoder gave 5"):
        tract_multimodal_generate(out, np.array([TEXT]), NEW_TOKENS, modality="audio", rows=rows)
    # the legacy prompt of one <|AUDIO|> per clip (transformers expands it inside its forward)
    with pytest.raises(InvalidArgumentError, match=r"1 placeholder token\(s\) \(id 90\) but the encoder gave 5"):
        tract_multimodal_generate(out, np.array([[2, 91, 90, 92, 7]]), NEW_TOKENS, modality="audio", rows=rows)
    # the features without their mask: the clip's length is not known
    with pytest.raises(InvalidArgumentError, match="input_features, feature_attention_mask"):
        tract_encode_all(out, features, modality="audio")
    # t2n.llm.generate given the features without their mask: it names what is missing
    without = {k: v for k, v in given.items() if k != "feature_attention_mask"}
    with pytest.raises(InvalidArgumentError, match="lack feature_attention_mask"):
        t2n.llm.generate(out, without, NEW_TOKENS)


def _manifest_says_the_rows(out: Path) -> None:
    """The manifest follows its schema; the encoder takes both tensors, and its rows (a
    length tract computes from the mask) are the decoder's ``AUD``, described by ``rows``."""
    import jsonschema

    manifest = json.loads((out / "multimodal.json").read_text())
    schema = json.loads((Path(__file__).resolve().parents[2] / "docs" / "multimodal.schema.json").read_text())
    jsonschema.validate(manifest, schema)
    (encoder,) = manifest["encoders"]
    _agrees(out / "decoder")  # the graphs declare the order modes.json and the manifest give
    assert _declared(out / encoder["path"]) == ([i["name"] for i in encoder["graph"]["inputs"]],
                                                [o["name"] for o in encoder["graph"]["outputs"]])
    assert encoder["inputs"] == ["input_features", "feature_attention_mask"]
    assert [i["shape"] for i in encoder["graph"]["inputs"]] == [["CLIPS", 16, 32], ["CLIPS", 32]]
    assert encoder["graph"]["outputs"][0]["shape"] == ["AUD", 64]
    assert "feature_attention_mask.sum()" in encoder["outputs"][0]["rows"]


def test_qwen2_audio_folder_streams_to_the_same_tokens(tmp_path: Path) -> None:
    """A ``save_pretrained`` folder (weights streamed from its shards), stateful cache."""
    case = qwen2_audio()
    case.model.save_pretrained(tmp_path / "checkpoint")
    t2n.llm.export_llm(tmp_path / "checkpoint", tmp_path / "out", kv_cache="stateful")
    inputs = _prompts()["one clip"]
    assert _tract_tokens(tmp_path / "out", inputs) == _transformers_tokens(case.model, inputs)
