"""Encoder-decoder models of ``transformers`` (Whisper, BART, Marian, T5, M2M100,
Pegasus, mBART) exported to tract as an encoder artifact, a decoder artifact with its
self-attention cache and the cross-attention keys/values as inputs, and ``seq2seq.json``.

``export_seq2seq(model_or_dir, export_dirpath, options)`` writes them and checks that
they generate in tract what the model generates; ``generate(export_dir, inputs,
max_new_tokens)`` runs them greedily in tract's Python package; ``is_seq2seq(model_or_dir)``
says whether a model or folder is an encoder-decoder (what ``export_llm`` dispatches here)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from t2n.llm.seq2seq.export import export_seq2seq
    from t2n.llm.seq2seq.families import is_seq2seq
    from t2n.llm.seq2seq.runner import generate

_LAZY = {"export_seq2seq": "t2n.llm.seq2seq.export", "generate": "t2n.llm.seq2seq.runner",
         "is_seq2seq": "t2n.llm.seq2seq.families"}

__all__ = ["export_seq2seq", "generate", "is_seq2seq"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 't2n.llm.seq2seq' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
