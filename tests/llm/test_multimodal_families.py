"""A multimodal family in both cache forms, from the tiny case of ``tiny_multimodal.CASES``:
text only, one image and two images in one prompt (each image encoded by its own encoder
call, the rows joined in the prompt's order) generate in tract the tokens of transformers'
``generate(do_sample=False)`` given the same prompt and raw inputs. A family is added by a
line of ``TWO_IMAGES``: its two-image prompt and the keywords its model takes for them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from t2n.llm import export_llm
from t2n.llm.multimodal.generate import tract_encode_images, tract_multimodal_generate

from .test_multimodal_sizes import Sized
from .tiny_multimodal import CASES, Case

pytestmark = pytest.mark.slow  # a tiny model exported and generated in tract, twice

NEW_TOKENS = 8

TwoImages = Callable[[Case, torch.Tensor, torch.Tensor], tuple[torch.Tensor, dict[str, Any]]]
"""``(case, first, second)`` (each image's raw input as the encoder takes it) -> the prompt
of both and the keywords of the model's ``generate`` for them, as its processor gives them."""


def _two_runs(prompt: torch.Tensor, around: int = 0) -> torch.Tensor:
    """A one-image prompt made a two-image one: its image (the placeholder run and the
    ``around`` tokens either side of it, its start and end tokens) repeated after a text token."""
    ids = prompt[0].tolist()
    at = [i for i, t in enumerate(ids) if t == 90]
    first, last = at[0] - around, at[-1] + around
    return torch.tensor([[*ids[:last + 1], 7, *ids[first:last + 1], *ids[last + 1:]]])


def _tiles(case: Case, first: torch.Tensor, second: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
    """A family whose ``pixel_values`` hold every image (tile) along the first axis."""
    return _two_runs(case.image_prompt), {"pixel_values": torch.cat([first, second])}


def _qwen(case: Case, first: torch.Tensor, second: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
    """A Qwen: each image between its vision start and end tokens, the patches of both
    along the first axis, a grid row each (both of the export's default grid)."""
    prompt = _two_runs(case.image_prompt, around=1)
    grid = case.generate_kwargs["image_grid_thw"]
    return prompt, {"pixel_values": torch.cat([first, second]), "image_grid_thw": torch.cat([grid, grid]),
                    "mm_token_type_ids": (prompt == 90).int()}


TWO_IMAGES: dict[str, TwoImages] = {"aya_vision": _tiles, "qwen2_vl": _qwen}


def _reference(case: Case, prompt: torch.Tensor, extra: dict[str, Any]) -> list[int]:
    """transformers' greedy tokens (no end token: as many as tract generates)."""
    case.model.generation_config.eos_token_id = None
    with torch.no_grad():
        out = case.model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=NEW_TOKENS,
                                  min_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0, **extra)
    return [int(t) for t in out[0, prompt.shape[1]:]]


@pytest.mark.parametrize("kv_cache", ["explicit", "stateful"])
@pytest.mark.parametrize("family", sorted(TWO_IMAGES))
def test_family_generates_as_transformers(family: str, kv_cache: str, tmp_path: Path) -> None:
    case = CASES[family]()
    out = tmp_path / "out"
    export_llm(case.model, out, kv_cache=kv_cache)
    assert tract_multimodal_generate(out, case.text_prompt, NEW_TOKENS) == \
        case.reference_tokens(case.text_prompt, NEW_TOKENS, with_image=False)
    first = case.pixels[0]
    one = _reference(case, case.image_prompt, case.generate_kwargs_for(case.image_prompt))
    assert tract_multimodal_generate(out, case.image_prompt, NEW_TOKENS, first.numpy()) == one

    second = first + 0.5 * torch.randn(first.shape, generator=torch.Generator().manual_seed(9))
    prompt, extra = TWO_IMAGES[family](case, first, second)
    expected = _reference(case, prompt, extra)
    assert len(set(expected)) > 3 and expected != one
    rows = tract_encode_images(out, [(first.numpy(), None), (second.numpy(), None)])
    assert tract_multimodal_generate(out, prompt, NEW_TOKENS, rows=rows) == expected


@pytest.mark.parametrize("family", sorted(TWO_IMAGES))
def test_family_folder_streams_to_the_same_tokens(family: str, tmp_path: Path) -> None:
    """A ``save_pretrained`` folder (weights streamed from its shards, renamed as
    ``from_pretrained`` renames them), stateful cache, one image."""
    case = CASES[family]()
    case.model.save_pretrained(tmp_path / "checkpoint")
    export_llm(tmp_path / "checkpoint", tmp_path / "out", kv_cache="stateful")
    assert tract_multimodal_generate(tmp_path / "out", case.image_prompt, NEW_TOKENS, case.pixels[0].numpy()) == \
        case.reference_tokens(case.image_prompt, NEW_TOKENS, with_image=True)


def test_qwen2_vl_encoders_of_other_sizes(tmp_path: Path) -> None:
    """Qwen2-VL with ``image_sizes``: an encoder per size (not the default), two images of
    different sizes in one prompt generate transformers' tokens."""
    sized = Sized("qwen2_vl")
    sizes = [(112, 224), (224, 112)]  # whole merges of 56 px patches, not the default 224 x 224
    export_llm(sized.model, tmp_path / "out", image_sizes=sizes)
    images = [(sized.raw(size, seed=20 + i), size) for i, size in enumerate(sizes)]
    rows = tract_encode_images(tmp_path / "out", [(r.numpy(), s) for r, s in images])
    assert tract_multimodal_generate(tmp_path / "out", sized.prompt(sizes), NEW_TOKENS, rows=rows) == \
        sized.reference_tokens(images)
