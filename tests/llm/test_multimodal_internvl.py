"""InternVL exported as encoder + decoder: the processor's ``pixel_values`` hold every tile
of every image along the first axis (an image's crops, then its thumbnail), and the
encoder computes in tract what the model's own forward writes at the image tokens;
``t2n.llm.generate`` on the processor's dict gives the tokens of transformers'
``generate(do_sample=False)``, text only, with one image and with two (one of two tiles),
in both cache forms."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import t2n.llm
from t2n.errors import InvalidArgumentError
from t2n.llm.multimodal.generate import tract_encode

from .test_graph_names import _agrees, _declared
from .test_schema_driver import drive
from .tiny_multimodal import decoder_rows, internvl

pytestmark = pytest.mark.slow  # a tiny model exported twice and run in tract: CI's second step

NEW_TOKENS = 8
TEXT = [2, 5, 7, 8, 11]
ONE = [2, 5, 91, *[90] * 4, 92, 7, 8]
TWO = [2, 91, *[90] * 8, 92, 5, 91, *[90] * 4, 92, 7]
"""Two images: the first of two tiles (8 placeholders), the second of one (4)."""


def _pixels(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _prompts() -> dict[str, dict[str, torch.Tensor]]:
    """The processor's dicts: text only, one image of one tile, two images of three tiles."""
    prompts = {"text only": {"input_ids": torch.tensor([TEXT])},
               "one image": {"input_ids": torch.tensor([ONE]), "pixel_values": _pixels((1, 3, 28, 28), 5)},
               "two images": {"input_ids": torch.tensor([TWO]), "pixel_values": _pixels((3, 3, 28, 28), 6)}}
    for given in prompts.values():
        given["attention_mask"] = torch.ones_like(given["input_ids"])
    return prompts


def _transformers_tokens(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> list[int]:
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                             do_sample=False, pad_token_id=0)
    return [int(t) for t in out[0, inputs["input_ids"].shape[1]:]]


@pytest.mark.parametrize("kv_cache", ["explicit", "stateful"])
def test_internvl_generates_transformers_tokens(kv_cache: str, tmp_path: Path) -> None:
    model = internvl().model
    out = tmp_path / "out"
    t2n.llm.export_llm(model, out, kv_cache=kv_cache)
    _manifest_follows_its_schema(out)

    # the encoder on tiles it was not traced on: the rows the model's forward writes at the image tokens
    prompts = _prompts()
    two = prompts["two images"]
    np.testing.assert_allclose(tract_encode(out, two["pixel_values"].numpy()), decoder_rows(model, two, 90).numpy(),
                               rtol=1e-4, atol=1e-4)

    for name, inputs in prompts.items():
        expected = _transformers_tokens(model, inputs)
        assert len(set(expected)) > 3, name
        if name == "one image":  # a runtime written from the manifests alone (tests/llm/test_schema_driver.py)
            raw = [v.numpy() for k, v in inputs.items() if k not in ("input_ids", "attention_mask")]
            assert drive(out, inputs["input_ids"].numpy(), raw, NEW_TOKENS) == expected
        assert t2n.llm.generate(out, {k: v.numpy() for k, v in inputs.items()}, NEW_TOKENS) == expected, name

    # an image whose placeholders are not in the prompt is refused, as transformers refuses it
    with pytest.raises(InvalidArgumentError, match=r"0 placeholder token\(s\) \(id 90\) but the encoder gave 4"):
        t2n.llm.generate(out, {"input_ids": np.array([TEXT]), "pixel_values": prompts["one image"]["pixel_values"]},
                         NEW_TOKENS)


def _manifest_follows_its_schema(out: Path) -> None:
    import jsonschema

    manifest = json.loads((out / "multimodal.json").read_text())
    schema = json.loads((Path(__file__).resolve().parents[2] / "docs" / "multimodal.schema.json").read_text())
    jsonschema.validate(manifest, schema)
    (encoder,) = manifest["encoders"]
    _agrees(out / "decoder")  # the graphs declare the order modes.json and the manifest give
    assert _declared(out / encoder["path"]) == ([i["name"] for i in encoder["graph"]["inputs"]],
                                                [o["name"] for o in encoder["graph"]["outputs"]])
    assert encoder["graph"]["inputs"][0]["shape"] == ["IMAGES", 3, 28, 28]
    assert encoder["graph"]["outputs"][0]["shape"] == ["4 * IMAGES", 64]


def test_internvl_folder_streams_to_the_same_tokens(tmp_path: Path) -> None:
    """A ``save_pretrained`` folder (weights streamed from its shards), stateful cache."""
    model = internvl().model
    model.save_pretrained(tmp_path / "checkpoint")
    t2n.llm.export_llm(tmp_path / "checkpoint", tmp_path / "out", kv_cache="stateful")
    inputs = {k: v.numpy() for k, v in _prompts()["two images"].items()}
    assert t2n.llm.generate(tmp_path / "out", inputs, NEW_TOKENS) == _transformers_tokens(model, _prompts()["two images"])
