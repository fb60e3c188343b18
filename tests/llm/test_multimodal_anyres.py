"""LLaVA-NeXT and LLaVA-OneVision (any-resolution tiling): one encoder per image size
(``image_sizes``; the original size the processor's ``image_sizes`` gives), whose tiles,
unpadding, OneVision's bilinear downsampling and ``image_newline`` rows are the model's
own packing computed for that size at export. Each encoder gives the model's features;
8 tokens generated with one image (and for LLaVA-NeXT with two images of different sizes
in one prompt) are transformers' in both cache forms, from an object and from its folder
(streamed)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import t2n.llm
from t2n.errors import InvalidArgumentError
from t2n.llm import export_llm
from t2n.llm.multimodal.families import anyres_rows, anyres_tiles
from t2n.llm.multimodal.generate import tract_encode, tract_encode_images, tract_multimodal_generate

from .tiny_multimodal import CASES, llava_next, llava_onevision

pytestmark = pytest.mark.slow  # tiny models exported and run in tract: CI's second step

NEW_TOKENS = 8
MAKERS = {"llava_next": llava_next, "llava_onevision": llava_onevision}
SIZES = {"llava_next": [(30, 50), (56, 20)],  # 5 tiles, unpadded rows; 3 tiles, unpadded columns
         "llava_onevision": [(112, 112), (100, 60)]}  # 4 x 4 tiles downsampled bilinearly; 4 x 3 unpadded


@pytest.mark.parametrize("kv_cache", ["explicit", "stateful"])
@pytest.mark.parametrize("family", ["llava_next", "llava_onevision"])
def test_anyres_sizes_generate_transformers_tokens(family: str, kv_cache: str, tmp_path: Path) -> None:
    sizes = SIZES[family]
    model = MAKERS[family]().model
    model.generation_config.eos_token_id = None  # greedy choices all along, as tract's generation makes them
    if family == "llava_onevision":  # the downsampled grid's rows are blends, not a selection
        assert anyres_rows(model, sizes[0])[1] is not None and anyres_rows(model, sizes[1])[1] is None
    model.save_pretrained(tmp_path / "checkpoint")
    config = {"max_new_tokens": NEW_TOKENS, "do_sample": False, "pad_token_id": 0}
    sources = [(model, tmp_path / "object")] + ([(tmp_path / "checkpoint", tmp_path / "folder")]
                                                if kv_cache == "stateful" else [])
    for source, out in sources:
        export_llm(source, out, image_sizes=sizes, kv_cache=kv_cache)  # checked against the forward at each size
        manifest = json.loads((out / "multimodal.json").read_text())
        assert [e["image_size"] for e in manifest["encoders"]] == [list(s) for s in sizes]
        for size in sizes:
            case = MAKERS[family](image_size=size)
            pixels = case.pixels[0].numpy()
            assert pixels.shape[1] == anyres_tiles(model, size)
            np.testing.assert_allclose(tract_encode(out, pixels, image_size=size), case.features(case.pixels).numpy(),
                                       rtol=1e-4, atol=1e-4)
            assert tract_multimodal_generate(out, case.image_prompt, NEW_TOKENS, pixels, image_size=size) == \
                case.reference_tokens(case.image_prompt, NEW_TOKENS, with_image=True), (source, size)

        if family == "llava_onevision":  # its processor tiles only a prompt's one image (batch_num_images)
            case = MAKERS[family](image_size=sizes[0])
            processed = {"input_ids": case.image_prompt, "pixel_values": case.pixels[0],
                         "image_sizes": torch.tensor([list(sizes[0])]), "batch_num_images": torch.tensor([1])}
            assert t2n.llm.generate(out, processed, NEW_TOKENS) == \
                case.reference_tokens(case.image_prompt, NEW_TOKENS, with_image=True)
            with pytest.raises(InvalidArgumentError, match="batch_num_images"):
                t2n.llm.generate(out, {**processed, "batch_num_images": torch.tensor([2])}, NEW_TOKENS)
            continue
        # two images of different sizes in one prompt: the processor pads the tiles to the longest
        cases = [MAKERS[family](image_size=s, image_seed=5 + i) for i, s in enumerate(sizes)]
        counts = [int((c.image_prompt == 90).sum()) for c in cases]
        prompt = torch.tensor([[2, 5, *[90] * counts[0], 7, *[90] * counts[1], 8]])
        tiles = max(c.pixels[0].shape[1] for c in cases)
        padded = torch.zeros((2, tiles, 3, 28, 28))
        for i, c in enumerate(cases):
            padded[i, :c.pixels[0].shape[1]] = c.pixels[0][0]
        with torch.no_grad():
            expected = model.generate(prompt, attention_mask=torch.ones_like(prompt), pixel_values=padded,
                                      image_sizes=torch.tensor([list(s) for s in sizes]),
                                      **config)[0, prompt.shape[1]:].tolist()
        rows = tract_encode_images(out, [(c.pixels[0].numpy(), s) for c, s in zip(cases, sizes)])
        assert tract_multimodal_generate(out, prompt, NEW_TOKENS, rows=rows) == expected, source
        processed = {"input_ids": prompt, "attention_mask": torch.ones_like(prompt), "pixel_values": padded,
                     "image_sizes": torch.tensor([list(s) for s in sizes])}  # what the processor returns
        assert t2n.llm.generate(out, processed, NEW_TOKENS) == expected, source
        with pytest.raises(InvalidArgumentError, match="no encoder of this export takes images of 28 x 28"):
            t2n.llm.generate(out, {**processed, "image_sizes": torch.tensor([[28, 28], [28, 28]])}, NEW_TOKENS)


def test_anyres_sizes_are_checked(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="positive"):
        export_llm(CASES["llava_next"]().model, tmp_path / "out", image_sizes=[(0, 28)])
    assert not (tmp_path / "out").exists()
