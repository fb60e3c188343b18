"""Multimodal exports with ``compression="min_max_q4_0"``: the decoder's and the
encoder's linear weights are written as Q4_0 (a patch embedding whose rows do not split
into blocks of 32 stays in float), from a model object and from a checkpoint folder
streamed into the archives; tract generates with an image what the model with the
dequantized weights generates in transformers, and encodes its image features."""

from __future__ import annotations

import json
import logging
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

from t2n.llm import export_llm
from t2n.llm.multimodal.generate import tract_encode, tract_multimodal_generate
from t2n.quant.q4_0 import is_q4_0_header

from .tiny_multimodal import CASES

NEW_TOKENS = 8
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _dat_bytes(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tgz:
        return {m.name: tgz.extractfile(m).read()  # type: ignore[union-attr]
                for m in tgz.getmembers() if m.name.endswith(".dat")}


def _q4_0_names(archive: Path) -> set[str]:
    return {n for n, b in _dat_bytes(archive).items() if is_q4_0_header(b[:128])}


def _paths(out: Path) -> tuple[Path, Path]:
    manifest = json.loads((out / "multimodal.json").read_text())
    (encoder,) = manifest["encoders"]
    return out / encoder["path"], out / manifest["decoder"]["path"]


@pytest.mark.parametrize("family", ["gemma3", "idefics3"])
def test_q4_0_from_an_object_and_a_folder(family: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    case = CASES[family]()
    case.model.save_pretrained(tmp_path / "checkpoint")  # the float weights, streamed below
    with caplog.at_level(logging.INFO, logger="t2n.quant"):
        export_llm(case.model, tmp_path / "object", compression="min_max_q4_0")  # quantized in place
    assert "patch_embedding.weight stays in float" in caplog.text  # 3 x 7 x 7 values a row
    export_llm(tmp_path / "checkpoint", tmp_path / "folder", compression="min_max_q4_0")

    for out in (tmp_path / "object", tmp_path / "folder"):
        encoder, decoder = _paths(out)
        quantized = _q4_0_names(decoder)
        for layer in range(2):
            for projection in PROJECTIONS:
                assert any(f"layers.{layer}." in n and projection in n for n in quantized), (projection, quantized)
        assert not any("norm" in n for n in quantized)
        encoder_q4_0 = _q4_0_names(encoder)
        assert any("q_proj" in n for n in encoder_q4_0) and any("fc1" in n for n in encoder_q4_0), encoder_q4_0
        assert not any("patch_embedding" in n for n in encoder_q4_0)

        # the model object now holds the dequantized weights: tract computes its features and tokens
        other = tuple(p + 0.5 * torch.randn(p.shape, generator=torch.Generator().manual_seed(9))
                      for p in case.pixels)
        np.testing.assert_allclose(tract_encode(out, *(p.numpy() for p in other)), case.features(other).numpy(),
                                   rtol=1e-4, atol=1e-4)
        pixels = [p.numpy() for p in case.pixels]
        assert tract_multimodal_generate(out, case.image_prompt, NEW_TOKENS, *pixels) == \
            case.reference_tokens(case.image_prompt, NEW_TOKENS, with_image=True)

    # streamed from the shards: the same Q4_0 blocks (and float tensors) as quantized in memory
    for streamed, loaded in zip(_paths(tmp_path / "folder"), _paths(tmp_path / "object")):
        assert _dat_bytes(streamed) == _dat_bytes(loaded)
