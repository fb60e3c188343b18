"""Vision-language models exported as encoder + decoder + ``multimodal.json``: each
encoder computes in tract the model's own image features, and the decoder generates in
tract, with an image and without, the tokens of transformers' ``generate(do_sample=False)``
given the same pixel values."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from t2n.llm import export_llm
from t2n.llm.multimodal.generate import (
    tract_encode,
    tract_multimodal_generate,
    tract_prefill_logits,
)

from .tiny_multimodal import CASES, Case

NEW_TOKENS = 8


def _features(case: Case, pixels: tuple[torch.Tensor, ...]) -> np.ndarray:
    return case.features(pixels).numpy()


@pytest.mark.slow  # about 5 s a family
@pytest.mark.parametrize("family", ["gemma3", "idefics3", "smolvlm", "mistral3", "qwen2_5_vl", "qwen3_vl", "voxtral", "llava",
                                    "paligemma", "paligemma2", "llava_next", "llava_onevision",
                                    "aya_vision", "qwen2_vl"])
def test_encoder_and_generation_match_transformers(family: str, tmp_path: Path) -> None:
    case = CASES[family]()
    out = tmp_path / "out"
    manifest_path = export_llm(case.model, out)
    assert manifest_path == out / "multimodal.json"
    manifest = json.loads(manifest_path.read_text())
    (encoder,) = manifest["encoders"]
    modality = case.modality
    placeholder = int(getattr(case.model.config, f"{modality}_token_id"))
    assert encoder["modality"] == modality and encoder["placeholder_token_id"] == placeholder
    assert encoder["outputs"][0]["feeds"] == f"in_{modality}_embeddings"
    assert (out / encoder["path"]).is_file() and (out / manifest["decoder"]["path"]).is_file()
    modes = json.loads((out / manifest["decoder"]["modes"]).read_text())
    assert modes["inputs"][0] == "input_ids" and modes["embeddings"]["input"] == f"in_{modality}_embeddings"
    fed = [f"in_{modality}_embeddings", *(d["feeds"] for d in encoder.get("deepstack", [])),
           *(o["feeds"] for o in encoder["outputs"][1:])]  # then the grid positions (Qwen)
    assert modes["inputs"][-len(fed):] == fed

    # the encoder on other pixel values than it was traced on: the model's own features
    other = tuple(p + 0.5 * torch.randn(p.shape, generator=torch.Generator().manual_seed(9)) for p in case.pixels)
    np.testing.assert_allclose(tract_encode(out, *(p.numpy() for p in other), modality=modality), _features(case, other),
                               rtol=1e-4, atol=1e-4)
    assert int((case.image_prompt == placeholder).sum()) == _features(case, case.pixels).shape[0]

    # the prefill's logits with the image (bidirectional image spans included): the last
    # position's, as the text models' default num_logits_to_keep=1 keeps
    logits = tract_prefill_logits(out, case.image_prompt, *(p.numpy() for p in case.pixels), modality=modality)
    np.testing.assert_allclose(logits, case.reference_logits(case.image_prompt)[:, -1:].numpy(), rtol=1e-3, atol=1e-3)

    with_image = tract_multimodal_generate(out, case.image_prompt, NEW_TOKENS, *(p.numpy() for p in case.pixels),
                                           modality=modality)
    assert with_image == case.reference_tokens(case.image_prompt, NEW_TOKENS, with_image=True)
    text_only = tract_multimodal_generate(out, case.text_prompt, NEW_TOKENS)
    assert text_only == case.reference_tokens(case.text_prompt, NEW_TOKENS, with_image=False)


def test_options_it_does_not_take_are_refused_by_name(tmp_path: Path) -> None:
    from t2n.errors import InvalidArgumentError

    model = CASES["gemma3"]().model
    for options, named in (({"window_kv_cache": True}, "window_kv_cache"),
                           ({"force_inputs_dtype": "f16"}, "force_inputs_dtype")):
        with pytest.raises(InvalidArgumentError, match=named):
            export_llm(model, tmp_path / "out", **options)  # type: ignore[arg-type]
        assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_cli_exports_a_multimodal_folder(tmp_path: Path) -> None:
    """``t2n llm --local-dir`` on an Idefics3 checkpoint folder writes the manifest, and
    the artifacts generate what the saved model generates."""
    from cli.cli_support import make_runner

    case = CASES["idefics3"]()
    case.model.save_pretrained(tmp_path / "checkpoint")
    out = tmp_path / "out"
    done = make_runner()("llm", "--local-dir", str(tmp_path / "checkpoint"), "--export-dirpath", str(out))
    assert done.returncode == 0, done.stderr
    assert f"wrote {out / 'multimodal.json'}" in done.stdout
    pixels = [p.numpy() for p in case.pixels]
    assert tract_multimodal_generate(out, case.image_prompt, NEW_TOKENS, *pixels) == \
        case.reference_tokens(case.image_prompt, NEW_TOKENS, with_image=True)


def test_a_multimodal_folder_without_weights_is_refused(tmp_path: Path) -> None:
    from t2n.errors import CheckpointFolderError

    case = CASES["idefics3"]()
    case.model.config.save_pretrained(tmp_path / "checkpoint")
    with pytest.raises(CheckpointFolderError, match="safetensors"):
        export_llm(tmp_path / "checkpoint", tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_f16_generates_identically(tmp_path: Path) -> None:
    """An f16 export (its encoder takes f32 pixel values, as the processor gives them)
    generates what the f16 model generates in transformers."""
    case = CASES["idefics3"]()
    case.model.to(torch.float16)
    out = tmp_path / "out"
    export_llm(case.model, out, dtype="f16", tract_check_io_tolerance="very")
    modes = json.loads((out / "decoder" / "modes.json").read_text())
    assert modes["cache"]["dtype"] == "float16"
    pixels = [p.numpy() for p in case.pixels]
    half = Case(case.model, case.image_prompt, case.text_prompt, case.pixels,
                {"pixel_values": case.pixels[0][None].half()})
    assert tract_multimodal_generate(out, case.image_prompt, NEW_TOKENS, *pixels) == \
        half.reference_tokens(case.image_prompt, NEW_TOKENS, with_image=True)


@pytest.mark.parametrize("family, norms", [("gemma3", 13), ("qwen2_5_vl", 5)])
def test_reified_rope_and_rms_norm_in_the_decoder(family: str, norms: int, tmp_path: Path) -> None:
    """``reify_rope`` / ``reify_rms_norm``: the decoder's rotary embedding (Qwen's 3-D one
    too) and RMS norms as tract's own ops, tokens still transformers'."""
    import tarfile

    case = CASES[family]()
    export_llm(case.model, tmp_path / "out", reify_rope=True, reify_rms_norm=True)
    with tarfile.open(tmp_path / "out" / "decoder" / "model" / "model.nnef.tgz") as tar:
        handle = tar.extractfile("graph.nnef")
        assert handle is not None
        text = handle.read().decode()
    assert text.count("tract_transformers_apply_rope(") == 4  # q and k of 2 layers
    assert text.count("tract_core_rms_norm(") == norms
    pixels = [p.numpy() for p in case.pixels]
    assert tract_multimodal_generate(tmp_path / "out", case.image_prompt, NEW_TOKENS, *pixels) == \
        case.reference_tokens(case.image_prompt, NEW_TOKENS, with_image=True)


def test_an_image_without_its_placeholders_is_refused(tmp_path: Path) -> None:
    """transformers refuses image features that do not match the image tokens; so does
    t2n's driver, instead of dropping the image."""
    from t2n.errors import InvalidArgumentError

    case = CASES["idefics3"]()
    export_llm(case.model, tmp_path / "out", verify=False)
    pixels = tuple(p.numpy() for p in case.pixels)
    with pytest.raises(InvalidArgumentError, match=r"0 placeholder token\(s\) \(id 90\) but the encoder gave 4"):
        tract_multimodal_generate(tmp_path / "out", case.text_prompt, NEW_TOKENS, *pixels)
    with pytest.raises(InvalidArgumentError, match="2 placeholder token"):
        tract_prefill_logits(tmp_path / "out", case.image_prompt[:, :4], *pixels)


@pytest.mark.parametrize("kv_cache", ["explicit", "stateful"])
def test_llava_two_images_in_one_prompt(kv_cache: str, tmp_path: Path) -> None:
    """LLaVA (refused as "not a causal language model" until now): two images encoded in one
    encoder call, their rows at the two images' placeholders, generate transformers' tokens
    from an object and from its checkpoint folder (streamed)."""
    case = CASES["llava"]()
    pixels = torch.randn((2, 3, 28, 28), generator=torch.Generator().manual_seed(5))
    prompt = torch.tensor([[2, 5, *[90] * 16, 7, *[90] * 16, 8]])
    expected = case.model.generate(prompt, attention_mask=torch.ones_like(prompt), pixel_values=pixels,
                                   max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
                                   pad_token_id=0)[0, prompt.shape[1]:].tolist()
    assert len(set(expected)) > 3
    case.model.save_pretrained(tmp_path / "checkpoint")
    for source, out in ((case.model, tmp_path / "object"), (tmp_path / "checkpoint", tmp_path / "folder")):
        export_llm(source, out, kv_cache=kv_cache)
        assert tract_multimodal_generate(out, prompt, NEW_TOKENS, pixels.numpy()) == expected, source
