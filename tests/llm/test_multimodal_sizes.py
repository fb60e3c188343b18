"""Image sizes: ``image_sizes`` writes one encoder per size for the families whose
encoder is fixed to one size (Qwen2.5-VL's windows, Qwen3-VL's interpolated positions;
Mistral 3's one encoder takes every size and is checked at each), the manifest says which
size each takes, and the decoder places the
rows of images of any of those sizes (several sizes in one prompt included) as
transformers does: its 3-D rotary positions follow each image's grid."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from t2n.errors import InvalidArgumentError
from t2n.llm import export_llm
from t2n.llm.multimodal.generate import (
    tract_encode,
    tract_encode_images,
    tract_multimodal_generate,
    tract_prefill_logits,
)

from .tiny_multimodal import CASES, Case, mistral3

NEW_TOKENS = 8
PATCH, MERGE, IMAGE, START, END = 7, 2, 90, 91, 92


def _pixels(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


class Sized:
    """How a family's model takes images of given sizes: the encoder's raw input of one
    image, the model's own features of it, and ``generate``'s keywords for several."""

    def __init__(self, family: str) -> None:
        self.family = family
        self.case: Case = mistral3(image_size=56) if family == "mistral3" else CASES[family]()
        self.model: Any = self.case.model
        vision = getattr(self.model.config, "vision_config", None)
        self.patch = int(getattr(vision, "patch_size", PATCH)) if family != "mistral3" else PATCH

    def tokens(self, size: tuple[int, int]) -> int:
        step = self.patch * MERGE
        return (size[0] // step) * (size[1] // step)

    def raw(self, size: tuple[int, int], seed: int) -> torch.Tensor:
        if self.family == "mistral3":
            return _pixels((1, 3, *size), seed)
        p = self.patch
        return _pixels(((size[0] // p) * (size[1] // p), 3 * 2 * p * p), seed)

    def features(self, raw: torch.Tensor, size: tuple[int, int]) -> np.ndarray:
        with torch.no_grad():
            if self.family == "mistral3":
                out = self.model.get_image_features(raw, image_sizes=torch.tensor([size]), return_dict=True)
            else:
                grid = torch.tensor([[1, size[0] // self.patch, size[1] // self.patch]])
                out = self.model.get_image_features(raw, image_grid_thw=grid, return_dict=True)
        pooled = out.pooler_output
        pooled = torch.cat(list(pooled)) if isinstance(pooled, (list, tuple)) else pooled
        return pooled.reshape(-1, pooled.shape[-1]).numpy()

    def prompt(self, sizes: list[tuple[int, int]]) -> torch.Tensor:
        ids = [2, 5]
        for size in sizes:
            image = [IMAGE] * self.tokens(size)
            ids += image if self.family == "mistral3" else [START, *image, END]
        return torch.tensor([[*ids, 7, 8]])

    def reference(self, images: list[tuple[torch.Tensor, tuple[int, int]]]) -> Case:
        """The model's case for a prompt holding ``images`` one after the other."""
        sizes = [size for _, size in images]
        if self.family == "mistral3":  # padded to one batch, each image's size given
            height, width = max(s[0] for s in sizes), max(s[1] for s in sizes)
            batch = torch.zeros((len(images), 3, height, width))
            for i, (raw, (h, w)) in enumerate(images):
                batch[i, :, :h, :w] = raw[0]
            kwargs: dict[str, Any] = {"pixel_values": batch, "image_sizes": torch.tensor(sizes)}
        else:
            kwargs = {"pixel_values": torch.cat([raw for raw, _ in images]),
                      "image_grid_thw": torch.tensor([[1, h // self.patch, w // self.patch] for h, w in sizes]),
                      "mm_token_type_ids": lambda p: (p == IMAGE).int()}
        return Case(self.model, self.prompt(sizes), self.case.text_prompt, (), kwargs)

    def reference_tokens(self, images: list[tuple[torch.Tensor, tuple[int, int]]]) -> list[int]:
        case = self.reference(images)
        return case.reference_tokens(case.image_prompt, NEW_TOKENS, with_image=True)


SIZES = {"mistral3": [(28, 42), (56, 28)], "qwen2_5_vl": [(28, 56), (56, 28)], "qwen3_vl": [(28, 42), (42, 28)]}
"""Non-square sizes other than the default (56 x 56 for each model here); each family's
two sizes give the Qwens the same number of patches, so the size picks the encoder."""


@pytest.mark.slow  # about 10 s a family
@pytest.mark.parametrize("family", ["mistral3", "qwen2_5_vl", "qwen3_vl"])
def test_encoders_of_other_sizes_generate_as_transformers(family: str, tmp_path: Path) -> None:
    sized = Sized(family)
    sizes = SIZES[family]
    out = tmp_path / "out"
    export_llm(sized.model, out, image_sizes=sizes)
    manifest = json.loads((out / "multimodal.json").read_text())
    if family == "mistral3":  # one encoder of symbolic size (test_multimodal_dynamic.py)
        assert [e["image_size"] for e in manifest["encoders"]] == [["H", "W"]]
    else:
        assert [e["image_size"] for e in manifest["encoders"]] == [list(s) for s in sizes]
        for entry, (h, w) in zip(manifest["encoders"], sizes):
            assert entry["path"] == f"image/{h}x{w}/model.nnef.tgz" and (out / entry["path"]).is_file()
            assert (out / entry["tests"][0]).is_file()
            assert entry["image_grid_thw"] == [1, h // PATCH, w // PATCH]
        assert not (out / "image" / "model.nnef.tgz").exists()

    # each encoder, on pixel values of its size, computes the model's own features
    images = [(sized.raw(size, seed=20 + i), size) for i, size in enumerate(sizes)]
    for raw, size in images:
        rows = tract_encode(out, raw.numpy(), image_size=size)
        assert rows.shape[0] == sized.tokens(size)
        np.testing.assert_allclose(rows, sized.features(raw, size), rtol=1e-4, atol=1e-4)

    # one image of a non-square size, then two images of different sizes in one prompt
    raw, size = images[0]
    tokens = tract_multimodal_generate(out, sized.prompt([size]), NEW_TOKENS, raw.numpy(), image_size=size)
    assert tokens == sized.reference_tokens([images[0]])
    rows = tract_encode_images(out, [(r.numpy(), s) for r, s in images])
    both = sized.reference(images)
    np.testing.assert_allclose(tract_prefill_logits(out, both.image_prompt, rows=rows),
                               both.reference_logits(both.image_prompt)[:, -1:].numpy(), rtol=1e-3, atol=1e-3)
    assert tract_multimodal_generate(out, sized.prompt(sizes), NEW_TOKENS, rows=rows) == \
        sized.reference_tokens(images)


def test_image_sizes_are_checked_before_anything_is_written(tmp_path: Path) -> None:
    sized = Sized("qwen2_5_vl")
    with pytest.raises(InvalidArgumentError, match="21 x 28 pixels: a side is not a multiple of"):
        export_llm(sized.model, tmp_path / "out", image_sizes=[(21, 28)])
    assert not (tmp_path / "out").exists()
    with pytest.raises(InvalidArgumentError, match="longer than the vision tower's image_size 56"):
        export_llm(Sized("mistral3").model, tmp_path / "out", image_sizes=[(28, 70)])
    with pytest.raises(InvalidArgumentError, match="takes no image_sizes"):
        export_llm(CASES["gemma3"]().model, tmp_path / "out", image_sizes=[(28, 28)])
    assert not (tmp_path / "out").exists()


def test_a_qwen_encoder_is_picked_by_its_size(tmp_path: Path) -> None:
    """Qwen's flattened patches do not say the image's height and width: with several
    encoders, ``image_size`` picks one, and without it the helper says so."""
    from t2n.llm.multimodal.generate import encoder_entry

    manifest = {"encoders": [{"modality": "image", "image_size": [28, 56], "path": "a"},
                             {"modality": "image", "image_size": [56, 28], "path": "b"}]}
    patches = np.zeros((32, 294), dtype=np.float32)
    assert encoder_entry(manifest, (patches,), image_size=(56, 28))["path"] == "b"
    with pytest.raises(InvalidArgumentError, match=r"pass image_size=\(h, w\)"):
        encoder_entry(manifest, (patches,))
    pixels = np.zeros((1, 3, 56, 28), dtype=np.float32)  # Mistral 3's pixel values say it
    assert encoder_entry(manifest, (pixels,))["path"] == "b"


@pytest.mark.slow
def test_cli_writes_an_encoder_per_image_size_of_a_folder(tmp_path: Path) -> None:
    """``t2n llm --image-size HxW`` (repeated) on a Qwen2.5-VL folder, streamed: an encoder
    per size, and generation with a non-square image as transformers'."""
    from cli.cli_support import make_runner

    sized = Sized("qwen2_5_vl")
    sized.model.save_pretrained(tmp_path / "checkpoint")
    out = tmp_path / "out"
    done = make_runner()("llm", "--local-dir", str(tmp_path / "checkpoint"), "--export-dirpath", str(out),
                         "--image-size", "28x56", "--image-size", "56x28")
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "multimodal.json").read_text())
    assert [e["image_size"] for e in manifest["encoders"]] == [[28, 56], [56, 28]]
    raw, size = sized.raw((56, 28), seed=3), (56, 28)
    assert tract_multimodal_generate(out, sized.prompt([size]), NEW_TOKENS, raw.numpy(), image_size=size) == \
        sized.reference_tokens([(raw, size)])
    bad = make_runner()("llm", "--local-dir", str(tmp_path / "checkpoint"), "--export-dirpath",
                        str(tmp_path / "bad"), "--image-size", "56")
    assert bad.returncode != 0 and "HxW" in bad.stderr


@pytest.mark.slow  # two encoders of 256 and 1024 patches
def test_qwen2_5_vl_at_its_released_window_and_patch_sizes(tmp_path: Path) -> None:
    """Qwen2.5-VL as released (14 px patches, 112 px windows) at 224 x 224 and 448 x 448: the
    window partition is computed for each encoder's grid before the trace (it selects a
    grid's windows with a boolean mask), and image-conditioned generation in tract is
    transformers' at both sizes."""
    import transformers as tf

    torch.manual_seed(0)
    text = {"vocab_size": 96, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 1200,
            "rope_parameters": {"rope_type": "default", "mrope_section": [2, 3, 3], "rope_theta": 10000.0}}
    config = tf.Qwen2_5_VLConfig(
        text_config=text, image_token_id=IMAGE, vision_start_token_id=START, vision_end_token_id=END,
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                           patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=112,
                           fullatt_block_indexes=[1]))
    model = tf.Qwen2_5_VLForConditionalGeneration(config).eval()
    out = tmp_path / "out"
    export_llm(model, out, image_sizes=[(224, 224), (448, 448)])  # checked against the model at both sizes
    manifest = json.loads((out / "multimodal.json").read_text())
    assert [e["image_grid_thw"] for e in manifest["encoders"]] == [[1, 16, 16], [1, 32, 32]]
    for size in ((224, 224), (448, 448)):
        grid = torch.tensor([[1, size[0] // 14, size[1] // 14]])
        pixels = _pixels((int(grid[0, 1] * grid[0, 2]), 3 * 2 * 14 * 14), 4)
        rows = int(grid[0, 1] * grid[0, 2]) // 4
        prompt = torch.tensor([[2, 5, START, *[IMAGE] * rows, END, 7, 8]])
        with torch.no_grad():
            expected = model.generate(prompt, attention_mask=torch.ones_like(prompt), pixel_values=pixels,
                                      image_grid_thw=grid, mm_token_type_ids=(prompt == IMAGE).int(),
                                      max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
                                      pad_token_id=0)[0, prompt.shape[1]:].tolist()
        got = tract_multimodal_generate(out, prompt, NEW_TOKENS, pixels.numpy(), image_size=size)
        assert got == expected, size
