"""Idefics3's dropping of the processor's all-zero padding images, stated as data: the
manifest's ``preprocess`` rules (flatten ``[1, IMAGES, 3, H, W]``, drop the all-zero
images, leave ``pixel_attention_mask`` out). A driver written from the manifests alone
(it applies the rules with numpy) and ``t2n.llm.generate`` on the processor's padded
batch give transformers' ``generate`` tokens; the manifest is valid against the schema."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import t2n.llm
from t2n.llm import export_llm

from .test_schema_driver import drive
from .tiny_multimodal import _pixels, idefics3

pytestmark = pytest.mark.slow  # a tiny model exported and run in tract

NEW_TOKENS = 6
DOCS = Path(__file__).resolve().parents[2] / "docs"


def apply_rules(inputs: dict[str, np.ndarray], rules: list[dict]) -> dict[str, np.ndarray]:
    """The manifest's preprocess rules as a runtime reads them (only numpy)."""
    out = dict(inputs)
    for rule in rules:
        name = rule["input"]
        if name not in out:
            continue
        if rule["rule"] == "ignore":
            del out[name]
        elif rule["rule"] == "merge_axes":
            a = rule["axes"][0]
            out[name] = out[name].reshape(*out[name].shape[:a], -1, *out[name].shape[a + 2:])
        elif rule["rule"] == "drop_all_equal":
            axis = rule["axis"]
            other = tuple(i for i in range(out[name].ndim) if i != axis)
            out[name] = np.compress(~np.all(out[name] == rule["value"], axis=other), out[name], axis=axis)
        else:
            raise AssertionError(f"unknown rule {rule['rule']}")
    return out


@pytest.mark.parametrize("kv_cache", ["explicit", "stateful"])
def test_padding_images_dropped_by_the_manifest_rules(kv_cache: str, tmp_path: Path) -> None:
    import jsonschema
    model = idefics3().model
    model.generation_config.eos_token_id = None
    export_llm(model, tmp_path, kv_cache=kv_cache)
    manifest = json.loads((tmp_path / "multimodal.json").read_text())
    jsonschema.validate(manifest, json.loads((DOCS / "multimodal.schema.json").read_text()))
    rules = manifest["encoders"][0]["preprocess"]
    assert [r["rule"] for r in rules] == ["ignore", "merge_axes", "drop_all_equal"]

    pixels = torch.zeros((1, 3, 3, 28, 28))  # two real images and the processor's all-zero padding one
    pixels[0, 0], pixels[0, 1] = _pixels((3, 28, 28), 5), _pixels((3, 28, 28), 6)
    prompt = torch.tensor([[2, 5, *[90] * 4, 7, *[90] * 4, 8]])
    processed = {"input_ids": prompt, "attention_mask": torch.ones_like(prompt), "pixel_values": pixels,
                 "pixel_attention_mask": torch.ones((1, 3, 28, 28), dtype=torch.bool)}
    with torch.no_grad():
        expected = model.generate(**processed, max_new_tokens=NEW_TOKENS, do_sample=False,
                                  pad_token_id=0)[0, prompt.shape[1]:].tolist()
    ready = apply_rules({k: v.numpy() for k, v in processed.items()}, rules)
    assert ready["pixel_values"].shape == (2, 3, 28, 28) and "pixel_attention_mask" not in ready
    encoder_inputs = [ready[name] for name in manifest["encoders"][0]["inputs"]]
    assert drive(tmp_path, prompt.numpy(), encoder_inputs, NEW_TOKENS) == expected
    assert t2n.llm.generate(tmp_path, processed, NEW_TOKENS) == expected
