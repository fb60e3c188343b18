"""Checkpoint folders as ``save_pretrained`` writes them, with a small tokenizer."""

from __future__ import annotations

from pathlib import Path

import torch


def save_checkpoint(model: torch.nn.Module, folder: Path, *, tokenizer: bool = True) -> Path:
    """``folder`` with ``config.json``, ``model.safetensors`` and (optionally) a word-level
    ``tokenizer.json`` of the model's vocabulary."""
    model.save_pretrained(str(folder))
    if tokenizer:
        from tokenizers import Tokenizer, models, pre_tokenizers

        vocab = {f"w{i}": i for i in range(int(model.get_input_embeddings().weight.shape[0]))}
        tok = Tokenizer(models.WordLevel(vocab, unk_token="w0"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        tok.save(str(folder / "tokenizer.json"))
    return folder
