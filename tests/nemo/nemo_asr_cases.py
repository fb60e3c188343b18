"""NeMo recognizers for the tests of this folder: the tiny character models of
``tests/speech/nemo_models.py``, the same with SentencePiece vocabularies (a tokenizer
trained here on a few sentences, nothing downloaded), and NeMo's own text of label ids.

NeMo is imported inside the functions, never at module level (the tests skip without it).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from speech.nemo_models import build, config, liven, nemo_or_skip, synthetic_audio

__all__ = ["bpe_model", "build", "config", "nemo_decoding_text", "nemo_or_skip", "synthetic_audio",
           "tokenizer_dir"]

CORPUS = ("hello world, it's a test.\nthe quick brown fox jumps over the lazy dog!\n"
          "what? yes: no; maybe... don't stop\n") * 20

TOKENIZERS = {
    "nemo_default": {},
    "byte_fallback": {"byte_fallback": True, "bos": True, "eos": True, "vocab_size": 300,
                      "user_defined_symbols": ["<lang>"]},
    "remove_extra_whitespaces": {"remove_extra_whitespaces": True},
    "no_dummy_prefix": None,
}
"""SentencePiece BPE tokenizers: NeMo's ``create_spt_model`` as its ASR recipe calls it
(48 pieces), with byte fallback, control and user-defined pieces, with
``remove_extra_whitespaces``, and one trained without ``add_dummy_prefix``."""


def tokenizer_dir(root: Path, kind: str) -> Path:
    """A folder holding ``tokenizer.model`` of the ``kind`` in :data:`TOKENIZERS`."""
    from nemo.collections.common.tokenizers.sentencepiece_tokenizer import create_spt_model

    out = root / kind
    if (out / "tokenizer.model").exists():
        return out
    root.mkdir(parents=True, exist_ok=True)
    corpus = root / "corpus.txt"
    corpus.write_text(CORPUS)
    options = TOKENIZERS[kind]
    if options is None:
        import sentencepiece

        out.mkdir(parents=True)
        sentencepiece.SentencePieceTrainer.train(
            input=str(corpus), model_prefix=str(out / "tokenizer"), vocab_size=48, model_type="bpe",
            hard_vocab_limit=False, character_coverage=1.0, add_dummy_prefix=False, remove_extra_whitespaces=False,
            bos_id=-1, eos_id=-1, minloglevel=2)
        pieces = [line.split("\t")[0] for line in (out / "tokenizer.vocab").read_text().splitlines()]
        (out / "vocab.txt").write_text("".join(p + "\n" for p in pieces))  # NeMo packs it with the model
        return out
    options = dict(options)
    create_spt_model(str(corpus), options.pop("vocab_size", 48), -1, False, tokenizer_type="bpe",
                     output_dir=str(out), **options)
    return out


def bpe_model(name: str, tokenizer: Path) -> Any:
    """The model of ``config(name)`` with the SentencePiece vocabulary in ``tokenizer``
    (an ``*BPEModel``: its heads sized by the tokenizer), heads livened."""
    import t2n.nemo

    cfg = copy.deepcopy(config(name))
    cfg.pop("labels")
    cfg["tokenizer"] = {"dir": str(tokenizer), "type": "bpe"}
    for decoder in (cfg.get("decoder"), cfg.get("aux_ctc", {}).get("decoder")):
        if decoder and "num_classes" in decoder:
            decoder["num_classes"] = -1
    return liven(t2n.nemo.load_model(cfg))


def nemo_decoding_text(decoding: Any, ids: list[int]) -> str:
    """The text NeMo's decoding object (CTC or RNN-T, character or subword) writes for a
    hypothesis of label ids (``decode_hypothesis``, which ``transcribe()`` calls)."""
    import torch
    from nemo.collections.asr.parts.utils.rnnt_utils import Hypothesis

    hyp = Hypothesis(score=0.0, y_sequence=torch.tensor(ids, dtype=torch.long), text=None)
    if "CTC" in type(decoding).__name__:
        saved = decoding.compute_timestamps
        decoding.compute_timestamps = False
        try:
            [out] = decoding.decode_hypothesis([hyp], fold_consecutive=False)
        finally:
            decoding.compute_timestamps = saved
    else:
        [out] = decoding.decode_hypothesis([hyp])
    assert isinstance(out.text, str), out.text
    return out.text
