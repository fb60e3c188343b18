"""Multimodal checkpoint folders exported without loading them: the model is built on the
meta device, the folder's tensors are renamed as ``from_pretrained`` renames them (the
legacy names ``save_pretrained`` writes for Gemma 3, Mistral 3, Qwen2.5-VL, Voxtral) and
every weight streams from the shards into the encoder and the decoder. What tract
computes from those artifacts must be what the model computes in transformers."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import t2n.llm.common.streaming as streaming
from t2n.llm import export_llm
from t2n.llm.multimodal.generate import tract_multimodal_generate, tract_prefill_logits
from t2n.serialize.dat import read_dat

from .folders import export_memory_growth
from .tiny_multimodal import CASES

NEW_TOKENS = 8


@pytest.fixture
def never_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkpoint counts as bigger than memory, and loading any model fails the test."""
    import transformers

    def refuse(cls: Any, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"{cls.__name__}.from_pretrained loaded the checkpoint whole")

    monkeypatch.setattr(streaming, "REFERENCE_MEMORY_FRACTION", 0.0)
    monkeypatch.setattr(transformers.PreTrainedModel, "from_pretrained", classmethod(refuse))


def _weights(archive: Path) -> dict[str, np.ndarray]:
    """The ``.dat`` tensors of an archive by name (``model.`` + the model's tensor name)."""
    with tarfile.open(archive) as tgz:
        return {m.name.removesuffix(".dat"): read_dat(tgz.extractfile(m).read())  # type: ignore[union-attr]
                for m in tgz.getmembers() if m.name.endswith(".dat")}


def _assert_weights_are_the_models(out: Path, model: Any) -> None:
    """Every weight of each artifact read from the shards holds the bytes of the model's
    own tensor (its name in the model, ``model.`` before it)."""
    manifest = json.loads((out / "multimodal.json").read_text())
    state = {f"model.{k}": v for k, v in model.state_dict().items()}
    for path in [*(e["path"] for e in manifest["encoders"]), manifest["decoder"]["path"]]:
        written = {k: v for k, v in _weights(out / path).items() if k in state}
        assert len(written) >= 5, (path, sorted(_weights(out / path)))
        for name, value in written.items():
            expected = state[name].detach().numpy()
            assert value.dtype == expected.dtype and value.shape == expected.shape, name
            assert value.tobytes() == expected.tobytes(), name


@pytest.mark.parametrize("family", ["gemma3", "voxtral", "qwen2_5_vl", "idefics3", "mistral3", "smolvlm",
                                    "qwen3_vl"])
def test_folder_streams_into_encoder_and_decoder(family: str, never_loaded: None, tmp_path: Path) -> None:
    case = CASES[family]()
    case.model.save_pretrained(tmp_path / "checkpoint")
    out = tmp_path / "out"
    export_llm(tmp_path / "checkpoint", out)
    _assert_weights_are_the_models(out, case.model)
    raw = [p.numpy() for p in case.pixels]
    with_image = tract_multimodal_generate(out, case.image_prompt, NEW_TOKENS, *raw, modality=case.modality)
    assert with_image == case.reference_tokens(case.image_prompt, NEW_TOKENS, with_image=True)
    text_only = tract_multimodal_generate(out, case.text_prompt, NEW_TOKENS)
    assert text_only == case.reference_tokens(case.text_prompt, NEW_TOKENS, with_image=False)


def test_streamed_artifacts_are_checked_against_the_loaded_model(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    """When the model fits in memory it is loaded to check the streamed artifacts: a
    reference that differs from the shards is caught, and nothing is left behind."""
    import t2n.llm.multimodal.entry as entry
    from t2n.errors import CheckMismatchError

    case = CASES["idefics3"]()
    case.model.save_pretrained(tmp_path / "checkpoint")
    load = entry._load

    def tampered(*args: Any) -> Any:
        model = load(*args)
        with torch.no_grad():
            model.model.connector.modality_projection.proj.weight.mul_(2)
            model.lm_head.weight.mul_(2)
        return model

    monkeypatch.setattr(entry, "_load", tampered)
    with pytest.raises(CheckMismatchError):
        export_llm(tmp_path / "checkpoint", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    monkeypatch.setattr(entry, "_load", load)
    export_llm(tmp_path / "checkpoint", tmp_path / "out")  # the faithful reference agrees


def test_shards_that_disagree_with_the_config_are_named(never_loaded: None, tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    from t2n.errors import CheckpointFolderError

    case = CASES["gemma3"]()
    folder = tmp_path / "checkpoint"
    case.model.save_pretrained(folder)
    tensors = load_file(folder / "model.safetensors")
    del tensors["vision_tower.encoder.layers.0.mlp.fc1.weight"]  # the legacy name save_pretrained writes
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(CheckpointFolderError, match=r"1 tensor\(s\) missing from the shards: "
                                                    r"model\.vision_tower\.[a-z_.]*layers\.0\.mlp\.fc1\.weight;"):
        export_llm(folder, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("family", ["gemma3", "qwen3_vl"])
def test_last_position_logits_by_default_every_position_on_request(family: str, tmp_path: Path) -> None:
    case = CASES[family]()
    expected = case.reference_logits(case.image_prompt).numpy()
    raw = [p.numpy() for p in case.pixels]
    export_llm(case.model, tmp_path / "last")
    last = tract_prefill_logits(tmp_path / "last", case.image_prompt, *raw, modality=case.modality)
    assert last.shape == (1, 1, expected.shape[-1])
    np.testing.assert_allclose(last, expected[:, -1:], rtol=1e-3, atol=1e-3)
    assert json.loads((tmp_path / "last" / "decoder" / "modes.json").read_text())["logits"] == {"positions": "last"}
    export_llm(case.model, tmp_path / "all", num_logits_to_keep=0)
    every = tract_prefill_logits(tmp_path / "all", case.image_prompt, *raw, modality=case.modality)
    np.testing.assert_allclose(every, expected, rtol=1e-3, atol=1e-3)
    assert json.loads((tmp_path / "all" / "decoder" / "modes.json").read_text())["logits"] == {"positions": "all"}


@pytest.mark.parametrize("family", ["gemma3", "qwen3_vl"])
def test_samples_replay_in_tract(family: str, tmp_path: Path) -> None:
    """The encoder's and the decoder's ``tests/*.npz`` (a prefill with the encoder's rows
    at the placeholders, then decode steps; Qwen3-VL: rotary shift and DeepStack streams
    too) replay in tract, and are PyTorch's outputs."""
    from t2n.cli.check import replay_io_npz

    case = CASES[family]()
    out = tmp_path / "out"
    export_llm(case.model, out)
    manifest = json.loads((out / "multimodal.json").read_text())
    (encoder,) = manifest["encoders"]
    assert encoder["tests"] == [f"{case.modality}/tests/io.npz"]
    assert [s for s, _ in replay_io_npz(out / encoder["path"], out / encoder["tests"][0])] == ["encode"]
    modes = json.loads((out / "decoder" / "modes.json").read_text())
    assert modes["tests"] == ["tests/prefill.npz", "tests/decode.npz", "tests/io.npz"]
    steps = replay_io_npz(out / manifest["decoder"]["path"], out / "decoder" / "tests" / "io.npz")
    assert [s for s, _ in steps] == ["prefill", "decode"]
    prefill = np.load(out / "decoder" / "tests" / "prefill.npz")
    rows = prefill[f"in_{case.modality}_embeddings"]
    assert rows.shape[0] == int((prefill["input_ids"] == encoder["placeholder_token_id"]).sum()) > 0
    samples = np.load(out / case.modality / "tests" / "io.npz")
    np.testing.assert_array_equal(samples[f"encode/outputs/out_{case.modality}_embeddings"], rows)
    assert np.load(out / "decoder" / "tests" / "decode.npz")[f"in_{case.modality}_embeddings"].shape[0] == 0


def test_streamed_folder_without_reference_writes_no_samples(never_loaded: None, tmp_path: Path) -> None:
    CASES["voxtral"]().model.save_pretrained(tmp_path / "checkpoint")
    export_llm(tmp_path / "checkpoint", tmp_path / "out")
    assert json.loads((tmp_path / "out" / "decoder" / "modes.json").read_text())["tests"] == []
    assert json.loads((tmp_path / "out" / "multimodal.json").read_text())["encoders"][0]["tests"] == []
    assert not (tmp_path / "out" / "decoder" / "tests").exists()


@pytest.mark.slow
def test_peak_memory_is_a_small_fraction_of_the_checkpoint(tmp_path: Path) -> None:
    """An Idefics3 of about 250 MB exports from its folder with the memory of a fixed
    read chunk, not of its weights."""
    import transformers as tf

    torch.manual_seed(0)
    config = tf.Idefics3Config(
        text_config=dict(model_type="llama", vocab_size=32000, hidden_size=512, intermediate_size=1536,
                         num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=4,
                         max_position_embeddings=512),
        vision_config=dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                           image_size=28, patch_size=7), scale_factor=2, image_token_id=31999)
    tf.Idefics3ForConditionalGeneration(config).save_pretrained(tmp_path / "big")
    CASES["idefics3"]().model.save_pretrained(tmp_path / "warm")
    size = sum(p.stat().st_size for p in (tmp_path / "big").glob("*.safetensors"))
    growth = export_memory_growth(tmp_path / "big", tmp_path / "out", tmp_path / "warm")
    assert size > 200e6
    # a fixed cost (one 64 MiB read chunk of the shard: 66 MB measured for 238 MB), not a
    # share of the weights; loading the folder whole costs at least its size
    assert growth < 72 << 20, (growth, size)
    assert growth < 0.5 * size, (growth, size)


def test_side_files_carry_the_processor(tmp_path: Path) -> None:
    """``dump_with_tokenizer_and_conf``: ``OUT/config.json`` and, from a folder, its
    tokenizer, preprocessor and chat template in ``OUT/processor/`` (one folder
    ``AutoProcessor`` loads), byte for byte; a model object gives the config only."""
    import transformers

    case = CASES["gemma3"]()
    folder = tmp_path / "checkpoint"
    case.model.save_pretrained(folder)
    side = {"tokenizer_config.json": b'{"model_max_length": 128}', "preprocessor_config.json": b'{"size": 32}',
            "chat_template.jinja": b"{{ messages }}", "generation_config.json": b'{"max_length": 20}'}
    for name, data in side.items():
        (folder / name).write_bytes(data)
    export_llm(folder, tmp_path / "out", dump_with_tokenizer_and_conf=True, verify=False)
    for name in ("tokenizer_config.json", "preprocessor_config.json", "chat_template.jinja"):
        assert (tmp_path / "out" / "processor" / name).read_bytes() == side[name]
    assert (tmp_path / "out" / "generation_config.json").read_bytes() == side["generation_config.json"]
    config = transformers.AutoConfig.from_pretrained(tmp_path / "out")
    assert config.model_type == case.model.config.model_type
    assert (tmp_path / "out" / "multimodal.json").is_file()

    export_llm(case.model, tmp_path / "object", dump_with_tokenizer_and_conf=True, verify=False)
    assert (tmp_path / "object" / "config.json").is_file() and not (tmp_path / "object" / "processor").exists()
