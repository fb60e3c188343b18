"""The text of label ids is NeMo's: t2n's detokenization (the manifest's ``decoding.text``,
applied without NeMo) against NeMo's own decoding objects on id sequences made with
NeMo's tokenizer API (a trailing ``▁``, ``<unk>``, control, byte and user-defined pieces,
a space before punctuation) and random ones, for SentencePiece and character
vocabularies; and ``transcribe()``'s text of audio run through the artifacts in tract."""

from __future__ import annotations

import random

import pytest
from nemo_asr_cases import (
    bpe_model,
    build,
    nemo_decoding_text,
    synthetic_audio,
    tokenizer_dir,
)

import t2n.nemo

pytestmark = pytest.mark.slow
"""Each case builds and exports tiny NeMo models (a few seconds each, after NeMo's import)."""



def crafted_ids(tokenizer) -> list[list[int]]:
    """Id sequences made with NeMo's tokenizer: the cases where joining pieces naively
    goes wrong."""
    vocab = tokenizer.vocab
    words = tokenizer.text_to_ids("hello world")
    space = [vocab.index("\u2581")] if "\u2581" in vocab else []
    unk = [tokenizer.token_to_id("<unk>")]
    control = [i for i, v in enumerate(vocab) if v in ("<s>", "</s>")]
    foreign = tokenizer.text_to_ids("na\u00efve \u65e5\u672c \u20ac")  # byte pieces, or <unk>
    cases = [
        [], words, words + space, words + space + space, words + unk, unk + words, unk, space + words,
        space + space + words, space + unk + words, words + unk + space,
        tokenizer.text_to_ids("it 's , ok ? yes !") + space,
        control + words + control, control + space + words, foreign, foreign[:-1], foreign[:-1] + words,
        tokenizer.text_to_ids("<lang> hello <lang>"),
    ]
    return [c for c in cases if all(isinstance(i, int) for i in c)]


def random_ids(vocab: list[str], rng: random.Random, count: int = 400) -> list[list[int]]:
    """Random sequences, half of their ids special pieces or pieces that start with ``▁``."""
    special = [i for i, v in enumerate(vocab) if v.startswith(("\u2581", "<"))]
    return [[rng.choice(special) if rng.random() < 0.5 else rng.randrange(len(vocab))
             for _ in range(rng.randrange(0, 10))] for _ in range(count)]


def assert_text_is_nemos(asr, decoding, cases):
    wrong = [(ids, asr.text(ids), nemo_decoding_text(decoding, ids)) for ids in cases]
    wrong = [w for w in wrong if w[1] != w[2]]
    assert not wrong, f"{len(wrong)} of {len(cases)} differ, e.g. ids, t2n, NeMo: {wrong[:3]}"


@pytest.mark.parametrize("kind", ["nemo_default", "byte_fallback", "remove_extra_whitespaces", "no_dummy_prefix"])
def test_sentencepiece_text_is_nemos(tmp_path_factory, kind):
    """Every SentencePiece rule NeMo's CTC decoding goes through: the manifest records
    the tokenizer's special pieces and normalizer, and t2n's text equals NeMo's."""
    root = tmp_path_factory.getbasetemp() / "tokenizers"
    model = bpe_model("fastconformer_ctc", tokenizer_dir(root, kind))
    done = t2n.nemo.export_asr(model, tmp_path_factory.mktemp(kind) / "out", preprocessor=False, check=False)
    text = done.manifest.decoding["text"]
    assert text["tokenizer"] == "sentencepiece"
    assert text["leading_space"] == {"remove_extra_whitespaces": "each", "no_dummy_prefix": "keep"}.get(kind, "first")
    asr = t2n.nemo.load(done.path)
    tokenizer = model.tokenizer
    cases = crafted_ids(tokenizer)
    assert_text_is_nemos(asr, model.decoding, cases + random_ids(tokenizer.vocab, random.Random(kind)))
    if kind == "nemo_default":  # the two differences of the old join, spelled out
        words, space = tokenizer.text_to_ids("hello world"), tokenizer.vocab.index("\u2581")
        assert asr.text(words + [space]) == "hello world "
        assert asr.text(words + [tokenizer.token_to_id("<unk>")]) == "hello world \u2047 "
        assert asr.text(tokenizer.text_to_ids("it 's , ok")) == "it's, ok"
    if kind == "byte_fallback":
        assert set(text["pieces"]) == {"control", "unknown", "byte"} and len(text["pieces"]["byte"]) == 256
        assert asr.text(tokenizer.text_to_ids("na\u00efve \u65e5\u672c")) == "na\u00efve \u65e5\u672c"


def test_sentencepiece_hybrid_transcribes_text_as_nemo(tmp_path_factory):
    """A hybrid RNN-T + CTC model with a SentencePiece vocabulary: t2n's text equals the
    text of NeMo's transducer and CTC decodings for the same ids, and the text of NeMo's
    ``transcribe()`` for audio transcribed in tract."""
    root = tmp_path_factory.getbasetemp() / "tokenizers"
    model = bpe_model("fastconformer_hybrid", tokenizer_dir(root, "nemo_default"))
    done = t2n.nemo.export_asr(model, tmp_path_factory.mktemp("hybrid") / "out")
    asr = t2n.nemo.load(done.path)
    cases = crafted_ids(model.tokenizer) + random_ids(model.tokenizer.vocab, random.Random(5), 200)
    assert_text_is_nemos(asr, model.decoding, cases)
    assert_text_is_nemos(asr, model.ctc_decoding, cases)
    labels = set()
    for samples, seed in [(16000, 0), (20500, 1)]:  # a second or more: transcribe() does not pad them
        audio = synthetic_audio(samples, seed)
        hyp = model.transcribe([audio.numpy()], batch_size=1, return_hypotheses=True, verbose=False)[0]
        ids = asr.transcribe(audio.numpy())
        assert ids == [int(i) for i in hyp.y_sequence.tolist()]
        assert asr.text(ids) == hyp.text
        labels |= set(ids)
    assert len(labels) >= 5, labels


@pytest.mark.parametrize("name", ["fastconformer_ctc", "fastconformer_rnnt"])
def test_character_text_is_nemos(tmp_path, name):
    """Character vocabularies: labels end to end, a trailing space kept, one space before
    a punctuation mark of the vocabulary (here ``'``) dropped, as NeMo's decoding does;
    and ``transcribe()``'s text of audio transcribed in tract."""
    model = build(name)
    done = t2n.nemo.export_asr(model, tmp_path / "out", check=False)
    assert done.manifest.decoding["text"] == {"tokenizer": "chars", "punctuation": ["'"]}
    asr = t2n.nemo.load(done.path)
    vocab = list(done.manifest.decoding["vocabulary"])

    def ids(text):
        return [vocab.index(c) for c in text]

    cases = [ids(t) for t in ["", "a b ", " a", "a 'b", "a  'b", " 'a' ", "''", "  "]]
    rng = random.Random(name)
    cases += [[rng.randrange(len(vocab)) for _ in range(rng.randrange(0, 12))] for _ in range(300)]
    assert_text_is_nemos(asr, model.decoding, cases)
    assert asr.text(ids("a 'b ")) == "a'b "
    audio = synthetic_audio(20500, 1)
    hyp = model.transcribe([audio.numpy()], batch_size=1, return_hypotheses=True, verbose=False)[0]
    assert asr.text(asr.transcribe(audio.numpy())) == hyp.text and len(hyp.text) >= 5
