"""LLaVA-OneVision with several images in one prompt: its processor marks them with
``batch_num_images`` ``[n]`` and the model takes each image's base tile only, then one
``image_newline`` row. ``t2n.llm.generate`` on the processor's dict (every image's tiles,
padded to the longest; ``image_sizes``; ``batch_num_images``) follows the manifest's
``several_images`` rule and gives transformers' ``generate`` tokens, in both cache forms,
with images of sizes no encoder was exported for. Videos are refused by name."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import torch

import t2n.llm
from t2n.errors import InvalidArgumentError
from t2n.llm import export_llm

from .tiny_multimodal import llava_onevision

pytestmark = pytest.mark.slow  # a tiny model exported and run in tract

NEW_TOKENS = 8
SIZES = [(56, 28), (28, 84)]  # 3 and 4 tiles; neither is the exported default (28 x 28)


def _several_images(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """What the processor gives for a prompt of the images of ``SIZES``: each image's
    tiles padded to the longest, its size, ``batch_num_images`` [2], and as many
    placeholders per image as the model's own features have rows."""
    cases = [llava_onevision(image_size=s, image_seed=5 + i) for i, s in enumerate(SIZES)]
    tiles = max(c.pixels[0].shape[1] for c in cases)
    pixels = torch.zeros((len(cases), tiles, 3, 28, 28))
    for i, case in enumerate(cases):
        pixels[i, :case.pixels[0].shape[1]] = case.pixels[0][0]
    sizes, count = torch.tensor([list(s) for s in SIZES]), torch.tensor([len(SIZES)])
    with torch.no_grad():
        features = model.get_image_features(pixels, image_sizes=sizes, batch_num_images=count).pooler_output
    placeholders = [[90] * int(f.shape[0]) for f in features]
    prompt = torch.tensor([[2, 5, *placeholders[0], 7, *placeholders[1], 8]])
    return {"input_ids": prompt, "attention_mask": torch.ones_like(prompt), "pixel_values": pixels,
            "image_sizes": sizes, "batch_num_images": count}


@pytest.mark.parametrize("kv_cache", ["explicit", "stateful"])
def test_onevision_two_images_generate_transformers_tokens(kv_cache: str, tmp_path: Path) -> None:
    model = llava_onevision().model
    model.generation_config.eos_token_id = None  # greedy choices all along, as tract's generation makes them
    export_llm(model, tmp_path, kv_cache=kv_cache)
    manifest = json.loads((tmp_path / "multimodal.json").read_text())
    docs = Path(__file__).resolve().parents[2] / "docs"
    for document, schema in [(manifest, "multimodal"), (json.loads((tmp_path / "decoder/modes.json").read_text()),
                                                        "modes")]:
        jsonschema.validate(document, json.loads((docs / f"{schema}.schema.json").read_text()))
    entry = manifest["encoders"][0]
    assert entry["several_images"] == {"tiles": 1, "first_rows": 16, "last_rows": 1}
    processed = _several_images(model)
    assert int((processed["input_ids"] == 90).sum()) == 2 * (16 + 1)  # the base tile's rows and a newline each
    with torch.no_grad():
        expected = model.generate(**processed, max_new_tokens=NEW_TOKENS, do_sample=False,
                                  pad_token_id=0)[0, processed["input_ids"].shape[1]:].tolist()
    assert t2n.llm.generate(tmp_path, processed, NEW_TOKENS) == expected
    with pytest.raises(InvalidArgumentError, match="pixel_values_videos"):
        t2n.llm.generate(tmp_path, {**processed, "pixel_values_videos": torch.zeros((1, 2, 3, 28, 28))}, NEW_TOKENS)
    with pytest.raises(InvalidArgumentError, match="batch_num_images says 3"):
        t2n.llm.generate(tmp_path, {**processed, "batch_num_images": torch.tensor([3])}, NEW_TOKENS)
