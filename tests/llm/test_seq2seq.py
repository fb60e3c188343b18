"""Encoder-decoder exports (``t2n.llm.seq2seq``): tiny random models of each family
exported with the explicit and the stateful decoder cache generate in tract, through
``generate``, the tokens ``transformers``' own ``model.generate`` gives (never compared
with the modules t2n traces)."""

from __future__ import annotations

import json
import re
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from t2n.errors import CheckMismatchError, InvalidArgumentError, UnsupportedArchitectureError
from t2n.llm.common.options import LLMExportOptions
from t2n.llm.seq2seq import export_seq2seq, generate, is_seq2seq
from t2n.llm.seq2seq.rules import GenerationRules, rules_of

from .tiny_seq2seq import FAMILIES, WHISPER_TOKENS, source, tiny_seq2seq

pytestmark = pytest.mark.slow  # tiny models exported and run in tract: CI's second step

NEW_TOKENS = 12
FORMS = ("explicit", "stateful")
FRENCH = [WHISPER_TOKENS["start"], WHISPER_TOKENS["languages"]["<|fr|>"], WHISPER_TOKENS["tasks"]["transcribe"],
          WHISPER_TOKENS["no_timestamps"]]
"""The start tokens Whisper's generate builds for ``language="fr", task="transcribe"``."""


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], tuple[torch.nn.Module, Path]]:
    """(model, export folder) of a family in a cache form, exported once per module."""
    done: dict[tuple[str, str], tuple[torch.nn.Module, Path]] = {}

    def get(family: str, form: str) -> tuple[torch.nn.Module, Path]:
        if (family, form) not in done:
            model = tiny_seq2seq(family)
            out = tmp_path_factory.mktemp(f"{family}_{form}") / "out"
            export_seq2seq(model, out, LLMExportOptions(kv_cache=form))
            done[family, form] = model, out
        return done[family, form]

    return get


def transformers_tokens(model: Any, family: str, inputs: dict[str, torch.Tensor], **settings: Any) -> list[int]:
    """The ids ``model.generate`` gives after the decoder's start tokens (Whisper returns
    only those, without a final end token; the others begin with their one start token)."""
    with torch.no_grad():
        out = model.generate(**inputs, **settings, do_sample=False, max_new_tokens=NEW_TOKENS)
    ids = [int(t) for t in out[0]]
    return ids if family == "whisper" else ids[1:]


def without_end(tokens: list[int], end: int) -> list[int]:
    return tokens[:-1] if tokens and tokens[-1] == end else tokens


@pytest.mark.slow
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("family", FAMILIES)
def test_generates_the_tokens_of_transformers(exported: Any, family: str, form: str) -> None:
    model, out = exported(family, form)
    inputs = source(family)
    if family == "whisper":  # the forced tokens explicit: transformers builds them, t2n is given them
        expected = transformers_tokens(model, family, inputs, language="fr", task="transcribe")
        got = without_end(generate(out, {**inputs, "decoder_input_ids": torch.tensor([FRENCH])}, NEW_TOKENS),
                          WHISPER_TOKENS["eos"])
    else:
        expected = transformers_tokens(model, family, inputs)
        got = generate(out, {k: v.numpy() for k, v in inputs.items()}, NEW_TOKENS)
    assert got == expected
    assert len(set(got)) >= 4  # a generation that varies: each call reads the cache it was given


CROSS_PROJECTIONS = re.compile(r"(encoder_attn\.[kv]_proj|EncDecAttention\.[kv])\.")
"""The weights that project the encoder states into cross-attention keys and values."""


def weights(archive: Path) -> set[str]:
    with tarfile.open(archive) as tar:
        return {n.removesuffix(".dat") for n in tar.getnames() if n.endswith(".dat") and "/" not in n}


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_cross_keys_are_projected_once_by_the_encoder(exported: Any, family: str) -> None:
    """The encoder holds the cross-attention projections (and no other decoder weight);
    the decoder holds neither them nor any encoder weight: it reads the keys and values."""
    _, out = exported(family, "explicit")
    encoder, decoder = weights(out / "encoder/model.nnef.tgz"), weights(out / "decoder/model.nnef.tgz")
    in_encoder = {n for n in encoder if ".decoder." in f".{n}"}
    assert in_encoder and all(CROSS_PROJECTIONS.search(n) for n in in_encoder)
    assert not any(CROSS_PROJECTIONS.search(n) for n in decoder)
    assert not any(".encoder." in f".{n}" for n in decoder)


@pytest.mark.slow
def test_whisper_default_start_tokens(exported: Any) -> None:
    """Without decoder_input_ids, Whisper's start tokens are those transformers builds for
    English (where it would detect the language from the audio)."""
    model, out = exported("whisper", "explicit")
    english = [WHISPER_TOKENS["start"], WHISPER_TOKENS["languages"]["<|en|>"],
               WHISPER_TOKENS["tasks"]["transcribe"], WHISPER_TOKENS["no_timestamps"]]
    manifest = json.loads((out / "seq2seq.json").read_text())
    assert manifest["generation"]["prompt_token_ids"] == english
    assert manifest["generation"]["suppress_tokens"] == [42]
    assert manifest["generation"]["begin_suppress_tokens"] == [56]
    inputs = source("whisper", seed=8)
    assert without_end(generate(out, inputs, NEW_TOKENS), WHISPER_TOKENS["eos"]) == \
        transformers_tokens(model, "whisper", inputs, language="en")


@pytest.mark.slow
def test_manifest(exported: Any) -> None:
    _, out = exported("bart", "explicit")
    manifest = json.loads((out / "seq2seq.json").read_text())
    assert manifest["format"] == "t2n-seq2seq/1"
    assert (out / manifest["encoder"]["path"]).is_file() and (out / manifest["decoder"]["path"]).is_file()
    encoder, decoder = manifest["encoder"], manifest["decoder"]
    assert encoder["inputs"] == [{"name": "input_ids", "shape": [1, "T"], "dtype": "int64"}]
    assert [o["name"] for o in encoder["outputs"]] == ["encoder_hidden_states", "out_cross_key_0",
                                                       "out_cross_value_0", "out_cross_key_1", "out_cross_value_1"]
    assert encoder["outputs"][0]["feeds"] is None and encoder["outputs"][0]["shape"] == [1, "T", 32]
    assert encoder["outputs"][1] == {"name": "out_cross_key_0", "shape": [1, 4, "T", 8], "dtype": "float32",
                                     "feeds": "in_cross_key_0"}
    names = [i["name"] for i in decoder["inputs"]]
    assert names == ["input_ids", "in_cache_key_0", "in_cache_value_0", "in_cache_key_1", "in_cache_value_1",
                     "in_cross_key_0", "in_cross_value_0", "in_cross_key_1", "in_cross_value_1"]
    assert decoder["inputs"][1]["shape"] == [1, 4, "P", 8] and decoder["inputs"][5]["shape"] == [1, 4, "T", 8]
    assert decoder["outputs"][0] == {"name": "outputs", "shape": [1, 1, 96], "dtype": "float32"}
    assert decoder["outputs"][1]["shape"] == [1, 4, "P + S", 8]
    assert decoder["cache"]["form"] == "explicit" and decoder["max_positions"] == 64
    generation = manifest["generation"]
    assert generation["prompt_token_ids"] == [2] and generation["eos_token_ids"] == [2]
    assert generation["forced_eos_token_ids"] == [2] and generation["not_applied"] == []


@pytest.mark.slow
def test_stateful_decoder_takes_tokens_and_cross_keys(exported: Any) -> None:
    _, out = exported("bart", "stateful")
    decoder = json.loads((out / "seq2seq.json").read_text())["decoder"]
    assert [i["name"] for i in decoder["inputs"]] == ["input_ids", "in_cross_key_0", "in_cross_value_0",
                                                      "in_cross_key_1", "in_cross_value_1"]
    assert [o["name"] for o in decoder["outputs"]] == ["outputs"]
    assert decoder["cache"]["states"] == ["cache_key_0", "cache_value_0", "cache_key_1", "cache_value_1"]


F16 = {"bart": (6, 0.45), "whisper": (1, 0.4)}
"""(seed, weight scale) of the f16 models: weights narrower than the f32 tests' (at 0.6
tract's f16 logits and PyTorch's differ by up to 0.1 and near-ties make other tokens),
seeds whose generation varies."""


def cache_dtypes(out: Path) -> set[str]:
    decoder = json.loads((out / "seq2seq.json").read_text())["decoder"]
    return {decoder["cache"]["dtype"], *(i["dtype"] for i in decoder["inputs"] if i["name"] != "input_ids")}


def half_inputs(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.half() if v.is_floating_point() else v for k, v in inputs.items()}


@pytest.mark.slow
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("family", sorted(F16))
def test_f16_generates_the_tokens_of_transformers_in_f16(family: str, form: str, tmp_path: Path) -> None:
    """An f16 model is written in f16 (weights, caches, cross keys and values; Whisper's
    features given in f32 are cast), checked at the tolerance the f16 decoder-only tests
    use, and generates what transformers generates with the f16 model on the CPU."""
    model = tiny_seq2seq(family, *F16[family]).half()
    export_seq2seq(model, tmp_path / "out", LLMExportOptions(kv_cache=form, tract_check_io_tolerance="very"))
    assert cache_dtypes(tmp_path / "out") == {"float16"}
    inputs = source(family)
    if family == "whisper":
        prompt = {"decoder_input_ids": torch.tensor([FRENCH])}
        expected = transformers_tokens(model, family, half_inputs(inputs), language="fr", task="transcribe")
        got = without_end(generate(tmp_path / "out", {**inputs, **prompt}, NEW_TOKENS), WHISPER_TOKENS["eos"])
    else:
        expected = transformers_tokens(model, family, inputs)
        got = generate(tmp_path / "out", inputs, NEW_TOKENS)
    assert got == expected
    assert len(set(got)) >= 4


def f32_casts(archive: Path) -> int:
    with tarfile.open(archive) as tar:
        member = tar.extractfile("graph.nnef")
        assert member is not None
        return member.read().decode().count('to = "f32"')


@pytest.mark.slow
def test_dtype_f16_with_f32_forcing(tmp_path: Path) -> None:
    """``dtype="f16"`` casts an f32 model (in place, as the decoder-only export does); the
    f32 forcing of attention, linear accumulation and normalization is the target's, as
    there (more casts to f32 in both graphs): the f16 model's tokens."""
    model = tiny_seq2seq("whisper", *F16["whisper"])
    forcing = dict(force_f32_attention=True, force_f32_linear_accumulator=True, force_f32_normalization=True)
    export_seq2seq(model, tmp_path / "out", LLMExportOptions(dtype="f16", tract_check_io_tolerance="very", **forcing))
    assert next(model.parameters()).dtype == torch.float16 and cache_dtypes(tmp_path / "out") == {"float16"}
    inputs = source("whisper")
    expected = transformers_tokens(model, "whisper", half_inputs(inputs), language="en", task="transcribe")
    assert without_end(generate(tmp_path / "out", inputs, NEW_TOKENS), WHISPER_TOKENS["eos"]) == expected
    export_seq2seq(model, tmp_path / "plain", LLMExportOptions(verify=False))
    for part in ("encoder", "decoder"):
        assert f32_casts(tmp_path / "out" / part / "model.nnef.tgz") > f32_casts(tmp_path / "plain" / part /
                                                                                 "model.nnef.tgz")


@pytest.mark.slow
def test_bf16_folder_is_written_as_f16(tmp_path: Path) -> None:
    """A bf16 checkpoint is exported in f16 (tract's form of bf16) and generates what its
    weights cast to f16 generate in transformers."""
    import transformers as tf

    tiny_seq2seq("bart", *F16["bart"]).to(torch.bfloat16).save_pretrained(tmp_path / "ckpt")
    export_seq2seq(str(tmp_path / "ckpt"), tmp_path / "out", LLMExportOptions(tract_check_io_tolerance="very"))
    assert cache_dtypes(tmp_path / "out") == {"float16"}
    loaded = tf.BartForConditionalGeneration.from_pretrained(tmp_path / "ckpt").eval()
    assert next(loaded.parameters()).dtype == torch.bfloat16
    reference = loaded.to(torch.float16)
    inputs = source("bart")
    assert generate(tmp_path / "out", inputs, NEW_TOKENS) == transformers_tokens(reference, "bart", inputs)


@pytest.mark.slow
def test_from_a_checkpoint_folder(tmp_path: Path) -> None:
    import transformers as tf

    tiny_seq2seq("mbart").save_pretrained(tmp_path / "ckpt")
    assert is_seq2seq(tmp_path / "ckpt") and not is_seq2seq(tmp_path / "nothing")
    export_seq2seq(str(tmp_path / "ckpt"), tmp_path / "out")
    loaded = tf.AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "ckpt").eval()
    inputs = source("mbart")
    assert generate(tmp_path / "out", inputs, NEW_TOKENS) == transformers_tokens(loaded, "mbart", inputs)


@pytest.mark.slow
def test_a_gap_is_refused_and_nothing_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A decoder that computes other logits than the model (here shifted on one token) is
    refused by the export's own check, and the folder it created is removed."""
    from t2n.llm.seq2seq import wrappers

    forward = wrappers.DecoderWrapper.forward

    def shifted(self: Any, input_ids: torch.Tensor, *caches: torch.Tensor) -> tuple[torch.Tensor, ...]:
        logits, *rest = forward(self, input_ids, *caches)
        return (logits + torch.nn.functional.one_hot(torch.tensor(7), logits.shape[-1]), *rest)

    monkeypatch.setattr(wrappers.DecoderWrapper, "forward", shifted)
    with pytest.raises(CheckMismatchError, match="prefill"):
        export_seq2seq(tiny_seq2seq("pegasus"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_refused_before_writing(tmp_path: Path) -> None:
    import transformers as tf

    out = tmp_path / "out"
    small = dict(vocab_size=96, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                 decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, max_position_embeddings=32)
    cases: list[tuple[Any, LLMExportOptions, type[Exception], str]] = [
        (tf.BlenderbotSmallForConditionalGeneration(tf.BlenderbotSmallConfig(**small)), LLMExportOptions(),
         UnsupportedArchitectureError, "proven"),
        (tf.BartModel(tf.BartConfig(**small)), LLMExportOptions(), UnsupportedArchitectureError,
         "BartForConditionalGeneration"),
        (tf.BartForConditionalGeneration(tf.BartConfig(**small)), LLMExportOptions(merge_peft=tmp_path / "adapter"),
         InvalidArgumentError, "merge_peft"),
        (tf.BartForConditionalGeneration(tf.BartConfig(**small)), LLMExportOptions(kv_cache="stateful_int8"),
         InvalidArgumentError, "stateful_int8"),
        (tf.BartForConditionalGeneration(tf.BartConfig(**small)).double(), LLMExportOptions(), InvalidArgumentError,
         "f32 or f16"),
        (tf.BartForConditionalGeneration(tf.BartConfig(**small)), LLMExportOptions(force_inputs_dtype="f32"),
         InvalidArgumentError, "force_inputs_dtype"),
    ]
    assert is_seq2seq(cases[0][0]) and not is_seq2seq(tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=1, n_embd=16, n_head=2)))
    for model, options, error, message in cases:
        with pytest.raises(error, match=message):
            export_seq2seq(model, out, options)
        assert not out.exists()
    with pytest.raises(InvalidArgumentError, match="config.json"):
        export_seq2seq(str(tmp_path), out)


@pytest.mark.slow
def test_generate_refuses_what_the_graphs_do_not_take(exported: Any) -> None:
    _, out = exported("bart", "explicit")
    ids = np.array([[5, 6, 7, 8]])
    with pytest.raises(InvalidArgumentError, match="attention_mask"):
        generate(out, {"input_ids": ids, "attention_mask": np.array([[1, 1, 1, 0]])}, 4)
    with pytest.raises(InvalidArgumentError, match="batch 1"):
        generate(out, {"input_ids": np.concatenate([ids, ids])}, 4)
    with pytest.raises(InvalidArgumentError, match="positions"):
        generate(out, {"input_ids": ids}, 80)
    with pytest.raises(InvalidArgumentError, match="input_ids"):
        generate(out, {"input_features": ids}, 4)


def test_rules_choose_as_transformers_processors() -> None:
    rules = GenerationRules(prompt=(2,), eos=(1,), forced_bos=9, forced_eos=(1,), suppress=(3,),
                            begin_suppress=(4,), min_length=4)
    logits = np.zeros(10)
    logits[[1, 3, 4, 5]] = [9.0, 8.0, 7.0, 6.0]
    assert rules.next_token(logits, 1, 1, 8) == 9  # the forced first token
    assert rules.next_token(logits, 2, 1, 8) == 5  # no end (minimum length), 3 suppressed, 4 not first
    assert rules.next_token(logits, 4, 1, 8) == 1  # the end once the sequence is long enough
    assert rules.next_token(np.ones(10), 7, 1, 8) == 1  # the forced last token
    assert GenerationRules.from_json(rules.to_json()) == rules


def test_whisper_rules_follow_its_generation_config() -> None:
    model = tiny_seq2seq("whisper")
    model.generation_config.language, model.generation_config.task = "fr", "translate"
    assert rules_of(model, audio=True).prompt == (90, 92, 94, 95)
    model.generation_config.num_beams = 4
    assert rules_of(model, audio=True).not_applied == ("num_beams=4",)
