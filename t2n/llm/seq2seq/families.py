"""The encoder-decoder families ``export_seq2seq`` writes, each proven by generating the
tokens ``transformers`` generates (``tests/llm/test_seq2seq.py``): what the encoder
takes, how far the decoder's positions go, the example it is traced on. Any other
encoder-decoder model is refused by name, before anything is written."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import torch

from t2n.errors import UnsupportedArchitectureError

if TYPE_CHECKING:
    import transformers


@attrs.frozen
class Family:
    """One family: its ``model_type``, the ``transformers`` class with a language-model
    head that is exported, whether its encoder takes audio features (``input_features``
    ``[1, mel, frames]``, frames fixed by the model) or token ids (``input_ids`` ``[1, T]``),
    and the config fields that bound the decoder's and the encoder's positions (None:
    relative positions, no bound)."""

    model_type: str
    model_class: str
    audio: bool = False
    decoder_positions: str | None = "max_position_embeddings"
    encoder_positions: str | None = "max_position_embeddings"
    f16_overflow_guard: bool = False
    """In f16 its layers test their activations for infinities in Python (``if
    not torch.isfinite(h).all(): clamp``): a trace reads activations there, which a model
    on the meta device cannot give, so an f16 checkpoint folder of it is loaded whole."""

    @property
    def input_name(self) -> str:
        return "input_features" if self.audio else "input_ids"

    def decoder_limit(self, config: transformers.PretrainedConfig) -> int | None:
        """How many decoder positions the model embeds: ``S + P`` stays at or below it."""
        return _int_field(config, self.decoder_positions)

    def encoder_limit(self, config: transformers.PretrainedConfig) -> int | None:
        """How many source tokens the encoder embeds (None: audio, whose length is fixed)."""
        return None if self.audio else _int_field(config, self.encoder_positions)

    def example(self, model: transformers.PreTrainedModel, length: int = 6, seed: int = 1) -> torch.Tensor:
        """An encoder input: random token ids ``[1, length]``, or random audio features of the
        one length Whisper's encoder takes."""
        generator = torch.Generator().manual_seed(seed)
        config = model.config
        if self.audio:
            dtype = next(model.parameters()).dtype
            return torch.randn((1, int(config.num_mel_bins), audio_frames(model)), generator=generator).to(dtype)
        return torch.randint(0, int(config.vocab_size), (1, length), generator=generator)


def _int_field(config: transformers.PretrainedConfig, name: str | None) -> int | None:
    value = getattr(config, name, None) if name is not None else None
    return value if isinstance(value, int) and value > 0 else None


def audio_frames(model: transformers.PreTrainedModel) -> int:
    """The number of feature frames Whisper's encoder takes (it refuses any other):
    ``max_source_positions`` times the strides of its two convolutions."""
    encoder = model.get_encoder()
    conv1: torch.nn.Conv1d = encoder.conv1
    conv2: torch.nn.Conv1d = encoder.conv2
    return int(model.config.max_source_positions) * int(conv1.stride[0]) * int(conv2.stride[0])


FAMILIES: tuple[Family, ...] = (
    Family("whisper", "WhisperForConditionalGeneration", audio=True, decoder_positions="max_target_positions"),
    Family("bart", "BartForConditionalGeneration", f16_overflow_guard=True),
    Family("marian", "MarianMTModel", f16_overflow_guard=True),
    Family("t5", "T5ForConditionalGeneration", decoder_positions=None, encoder_positions=None,
           f16_overflow_guard=True),
    Family("m2m_100", "M2M100ForConditionalGeneration"),
    Family("pegasus", "PegasusForConditionalGeneration"),
    Family("mbart", "MBartForConditionalGeneration"),
    Family("mt5", "MT5ForConditionalGeneration", decoder_positions=None, encoder_positions=None,
           f16_overflow_guard=True),
)
"""The proven families, in the order they were proven."""

BY_TYPE = {f.model_type: f for f in FAMILIES}


def family_of(model_type: str | None, class_name: str | None) -> Family:
    """The family of a model of ``model_type`` whose class is ``class_name`` (None: a
    folder whose config names no architecture, loaded as the family's class);
    :class:`~t2n.errors.UnsupportedArchitectureError` for any other (another
    encoder-decoder, or a class of a proven family without a language-model head)."""
    family = BY_TYPE.get(model_type or "")
    proven = ", ".join(f"{f.model_class} ({f.model_type})" for f in FAMILIES)
    if family is None:
        raise UnsupportedArchitectureError(
            f"{class_name or 'the model'} (model_type {model_type!r}) is not an encoder-decoder family t2n "
            f"exports yet; the proven ones are: {proven}", architecture=class_name or str(model_type))
    if class_name is not None and class_name != family.model_class:
        raise UnsupportedArchitectureError(
            f"{class_name} is not the class t2n exports for {family.model_type}: generation needs its "
            f"language-model head, {family.model_class}; load the checkpoint as that class", architecture=class_name)
    return family


def is_seq2seq(model_or_dir: transformers.PreTrainedModel | str | os.PathLike[str]) -> bool:
    """Whether ``model_or_dir`` is an encoder-decoder model (its config, or its folder's
    ``config.json``, says ``is_encoder_decoder``) that is not a ``*ForCausalLM`` (the decoder
    of such a model alone, a causal LM): what ``export_llm`` hands to
    :func:`t2n.llm.seq2seq.export_seq2seq` (which refuses the families not proven)."""
    if isinstance(model_or_dir, (str, os.PathLike)):
        try:
            config = json.loads((Path(model_or_dir) / "config.json").read_text())
        except (OSError, ValueError):
            return False  # not a checkpoint folder: the causal-LM path names what is wrong
        if not isinstance(config, dict):
            return False
        names = config.get("architectures") or []
        causal = isinstance(names, list) and any(str(n).endswith("ForCausalLM") for n in names)
        return config.get("is_encoder_decoder") is True and not causal
    if type(model_or_dir).__name__.endswith("ForCausalLM"):
        return False
    return getattr(getattr(model_or_dir, "config", None), "is_encoder_decoder", False) is True
