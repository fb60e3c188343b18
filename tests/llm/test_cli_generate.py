"""``t2n generate`` as users run it (``t2n.cli.main``, what the console script calls) on
folders exported with ``dump_with_tokenizer_and_conf``: a causal LM and BART with a tiny
word-level tokenizer, Whisper with a tiny processor and a WAV file; the ids it prints are
those ``transformers`` generates from the same text or audio."""

from __future__ import annotations

import json
import logging
import shutil
import wave
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from cli.cli_support import make_runner

from t2n.llm import export_llm

from .tiny_models import reference_tokens, tiny_model
from .tiny_seq2seq import VOCAB, WHISPER_TOKENS, tiny_seq2seq

pytestmark = pytest.mark.slow  # each command loads torch and transformers: seconds

PROMPT = "w5 w6 w7 w8 w9 w10 w11"


def word_tokenizer(folder: Path) -> Any:
    """A word-level tokenizer of ``w0`` ... ``w95`` (``w0`` to ``w3``: bos, pad, eos, unk)
    saved in ``folder`` as transformers saves a fast tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({f"w{i}": i for i in range(VOCAB)}, unk_token="w3"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="w0", pad_token="w1", eos_token="w2",
                                   unk_token="w3")
    fast.save_pretrained(folder)
    return fast


def whisper_processor(folder: Path) -> Any:
    """Whisper's processor for the tiny model: 8 mel bins of 32 frames per second of 16 kHz
    audio (a hop of 500 samples), a tokenizer of the tiny vocabulary with its special tokens."""
    import transformers as tf

    t = WHISPER_TOKENS
    special = {t["start"]: "<|startoftranscript|>", t["eos"]: "<|endoftext|>", 91: "<|en|>", 92: "<|fr|>",
               93: "<|transcribe|>", 94: "<|translate|>", 95: "<|notimestamps|>"}
    tokenizer = tf.WhisperTokenizer(vocab={special.get(i, f"t{i}"): i for i in range(VOCAB)}, merges=[])
    tokenizer.add_special_tokens({"additional_special_tokens": [special[i] for i in range(90, 96)]})
    extractor = tf.WhisperFeatureExtractor(feature_size=8, sampling_rate=16000, hop_length=500, chunk_length=1)
    processor = tf.WhisperProcessor(feature_extractor=extractor, tokenizer=tokenizer)
    processor.save_pretrained(folder)
    return processor


def write_wav(path: Path, seconds: float = 0.5, rate: int = 16000) -> Path:
    """A 16-bit mono WAV of two tones."""
    t = np.arange(int(seconds * rate)) / rate
    samples = 0.3 * np.sin(2 * np.pi * 440 * t) + 0.2 * np.sin(2 * np.pi * 1250 * t)
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes((samples * 32767).astype("<i2").tobytes())
    return path


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, Any, Path]]:
    """(model, tokenizer or processor, export folder) of a causal LM, BART and Whisper,
    each exported from a checkpoint folder holding its tokenizer or processor (the model
    as transformers loads that folder: Whisper's frozen sinusoidal table is made again)."""
    import transformers as tf

    root = tmp_path_factory.mktemp("generate")
    made = {}
    for name, model in (("llama", tiny_model("llama")), ("bart", tiny_seq2seq("bart")),
                        ("whisper", tiny_seq2seq("whisper"))):
        checkpoint = root / name / "checkpoint"
        # as in a published checkpoint: transformers drops the language and task tables of a
        # generation config marked as made from the model's config when it loads it
        model.generation_config._from_model_config = False
        model.save_pretrained(checkpoint)
        side = whisper_processor(checkpoint) if name == "whisper" else word_tokenizer(checkpoint)
        export_llm(str(checkpoint), root / name / "out", dump_with_tokenizer_and_conf=True)
        loaded = getattr(tf, type(model).__name__).from_pretrained(checkpoint, local_files_only=True).eval()
        made[name] = loaded, side, root / name / "out"
    return made


def run_generate(*args: str | Path) -> dict[str, Any]:
    done = make_runner()("generate", *args, "--json")
    assert done.returncode == 0, done.stderr
    printed: dict[str, Any] = json.loads(done.stdout)
    return printed


def test_a_causal_lm_continues_the_prompt(exports: dict[str, tuple[Any, Any, Path]]) -> None:
    model, tokenizer, out = exports["llama"]
    assert (out / "tokenizer" / "tokenizer.json").is_file()
    printed = run_generate(out, "--prompt", PROMPT, "--max-new-tokens", "8")
    prompt = torch.tensor([tokenizer(PROMPT)["input_ids"]])
    assert printed["ids"] == reference_tokens(model, prompt, 8)
    assert printed["text"] == tokenizer.decode(printed["ids"], skip_special_tokens=True)


def test_an_encoder_decoder_translates_the_prompt(exports: dict[str, tuple[Any, Any, Path]]) -> None:
    model, tokenizer, out = exports["bart"]
    printed = run_generate(out, "--prompt", PROMPT, "--max-new-tokens", "12")
    with torch.no_grad():
        expected = model.generate(**tokenizer(PROMPT, return_tensors="pt"), do_sample=False, max_new_tokens=12)
    assert printed["ids"] == [int(t) for t in expected[0, 1:]]  # after BART's start token
    assert printed["text"] == tokenizer.decode(printed["ids"], skip_special_tokens=True)


def test_whisper_transcribes_an_audio_file(exports: dict[str, tuple[Any, Any, Path]], tmp_path: Path) -> None:
    from transformers.audio_utils import load_audio

    model, processor, out = exports["whisper"]
    assert (out / "processor" / "processor_config.json").is_file()
    clip = write_wav(tmp_path / "clip.wav")
    printed = run_generate(out, "--audio", clip, "--max-new-tokens", "12")
    features = processor.feature_extractor(load_audio(str(clip), sampling_rate=16000), sampling_rate=16000,
                                           return_tensors="pt")["input_features"]
    with torch.no_grad():  # t2n's default start tokens: English, transcribe
        expected = model.generate(input_features=features, language="en", task="transcribe", do_sample=False,
                                  max_new_tokens=12)
    ids = printed["ids"][:-1] if printed["ids"][-1] == WHISPER_TOKENS["eos"] else printed["ids"]
    assert ids == [int(t) for t in expected[0]]
    assert len(set(ids)) >= 4


def test_without_tokenizer_files_one_line_says_how(exports: dict[str, tuple[Any, Any, Path]],
                                                   tmp_path: Path) -> None:
    _, _, out = exports["bart"]
    bare = tmp_path / "bare"
    shutil.copytree(out, bare, ignore=shutil.ignore_patterns("tokenizer"))
    done = make_runner()("generate", bare, "--prompt", PROMPT)
    assert done.returncode == 1
    assert done.stderr.strip().count("\n") == 0 and "--dump-with-tokenizer-and-conf" in done.stderr
    done = make_runner()("generate", exports["whisper"][2], "--prompt", PROMPT)
    assert done.returncode == 1 and "--audio" in done.stderr


def test_side_files_of_a_seq2seq_folder_and_of_a_model_object(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """The families' own tokenizer files (Marian's SentencePiece models here) are copied
    byte for byte; a model object has no folder: config.json only, and a warning says so."""
    model = tiny_seq2seq("marian")
    checkpoint = tmp_path / "checkpoint"
    model.save_pretrained(checkpoint)
    side = {"source.spm": b"source model", "target.spm": b"target model", "vocab.json": b'{"w0": 0}',
            "tokenizer_config.json": b'{"tokenizer_class": "MarianTokenizer"}'}
    for name, data in side.items():
        (checkpoint / name).write_bytes(data)
    export_llm(str(checkpoint), tmp_path / "out", dump_with_tokenizer_and_conf=True, verify=False)
    for name, data in side.items():
        assert (tmp_path / "out" / "tokenizer" / name).read_bytes() == data
    assert (tmp_path / "out" / "config.json").is_file() and (tmp_path / "out" / "generation_config.json").is_file()
    with caplog.at_level(logging.WARNING, logger="t2n"):
        export_llm(model, tmp_path / "object", dump_with_tokenizer_and_conf=True, verify=False)
    assert (tmp_path / "object" / "config.json").is_file() and not (tmp_path / "object" / "tokenizer").exists()
    assert "no checkpoint folder" in caplog.text
