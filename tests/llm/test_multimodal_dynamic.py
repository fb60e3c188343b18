"""Mistral 3's (Pixtral's) encoder takes images of any size in one artifact: the patch
grid, the 2-D rotary positions of each patch's row and column, the attention over all
patches and the patch merger are computed in the graph from the pixel values' height and
width, so one export runs at every size the processor gives, as transformers does."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from t2n import BakedSizeWarning
from t2n.errors import InvalidArgumentError
from t2n.llm import export_llm
from t2n.llm.multimodal.generate import tract_encode, tract_multimodal_generate

from .tiny_multimodal import mistral3

NEW_TOKENS = 8
STEP, IMAGE = 14, 90  # patch_size * spatial_merge_size pixels; the image token
SIZES = [(28, 42), (56, 28), (42, 56)]
"""Non-square sizes, none of them the traced one (56 x 56)."""


def _pixels(size: tuple[int, int], seed: int) -> torch.Tensor:
    return torch.randn((1, 3, *size), generator=torch.Generator().manual_seed(seed))


def _features(model: torch.nn.Module, pixels: torch.Tensor) -> np.ndarray:
    size = (int(pixels.shape[-2]), int(pixels.shape[-1]))
    with torch.no_grad():
        out = model.get_image_features(pixels, image_sizes=torch.tensor([size]),  # type: ignore[operator]
                                       return_dict=True).pooler_output
    return torch.cat(list(out)).numpy()


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[torch.nn.Module, Path]:
    case = mistral3(image_size=56)
    out = tmp_path_factory.mktemp("mistral3") / "out"
    with warnings.catch_warnings():  # no size of the graph is baked in at the traced one
        warnings.simplefilter("error", BakedSizeWarning)
        export_llm(case.model, out)  # no image_sizes: one encoder for every size
    return case.model, out


def test_the_manifest_describes_one_encoder_of_symbolic_size(exported: tuple[torch.nn.Module, Path]) -> None:
    _, out = exported
    (entry,) = json.loads((out / "multimodal.json").read_text())["encoders"]
    assert entry["path"] == "image/model.nnef.tgz" and (out / entry["path"]).is_file()
    assert entry["image_size"] == ["H", "W"]
    assert entry["input_shapes"] == {"pixel_values": [1, 3, "H", "W"]}
    assert entry["image_size_bounds"] == {s: {"min": STEP, "max": 56, "multiple_of": STEP} for s in "HW"}
    assert entry["outputs"][0]["rows"] == "(H / 14) * (W / 14)"


def test_one_encoder_computes_the_features_of_images_of_several_sizes(
        exported: tuple[torch.nn.Module, Path]) -> None:
    model, out = exported
    for i, size in enumerate(SIZES):
        pixels = _pixels(size, seed=30 + i)
        rows = tract_encode(out, pixels.numpy())
        assert rows.shape == ((size[0] // STEP) * (size[1] // STEP), 64)
        np.testing.assert_allclose(rows, _features(model, pixels), rtol=1e-4, atol=1e-4)


def test_generation_with_an_image_of_another_size_is_transformers(exported: tuple[torch.nn.Module, Path]) -> None:
    from transformers import GenerationConfig

    model, out = exported
    size = SIZES[0]
    pixels = _pixels(size, seed=40)
    prompt = torch.tensor([[2, 5, *[IMAGE] * ((size[0] // STEP) * (size[1] // STEP)), 7, 8]])
    model.generation_config.eos_token_id = None  # type: ignore[union-attr]
    config = GenerationConfig(max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        expected = model.generate(prompt, generation_config=config,  # type: ignore[operator]
                                  attention_mask=torch.ones_like(prompt), pixel_values=pixels,
                                  image_sizes=torch.tensor([size]))
    tokens = tract_multimodal_generate(out, prompt, NEW_TOKENS, pixels.numpy())
    assert tokens == [int(t) for t in expected[0, prompt.shape[1]:]]


def test_image_sizes_check_the_one_encoder_at_each_size(tmp_path: Path) -> None:
    """``image_sizes`` still checks each size, and checks the one encoder in tract on an
    image of each; a size beyond the bounds is refused before anything is written."""
    case = mistral3(image_size=56)
    out = tmp_path / "out"
    export_llm(case.model, out, image_sizes=[(42, 28)])
    (entry,) = json.loads((out / "multimodal.json").read_text())["encoders"]
    assert entry["path"] == "image/model.nnef.tgz" and not (out / "image" / "42x28").exists()
    pixels = _pixels((42, 28), seed=3)
    np.testing.assert_allclose(tract_encode(out, pixels.numpy(), image_size=(42, 28)),
                               _features(case.model, pixels), rtol=1e-4, atol=1e-4)
    with pytest.raises(InvalidArgumentError, match="longer than the vision tower's image_size 56"):
        export_llm(case.model, tmp_path / "bad", image_sizes=[(28, 70)])
    assert not (tmp_path / "bad").exists()
