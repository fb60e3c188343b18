"""The interface of an encoder-decoder export: the names, order and symbols of the
encoder's and the decoder's inputs and outputs, and which encoder output feeds which
decoder input. One object, read off one real call of the model, so that the traced
modules, the manifest and the runtime loop agree by construction."""

from __future__ import annotations

import attrs
import torch

ENCODER_STATES = "encoder_hidden_states"
"""The encoder output that holds its last hidden states (fed to no decoder input: the
decoder reads the cross-attention keys and values computed from them)."""

LOGITS = "outputs"
"""The decoder's logits output (the last position's), named as the decoder-only export's."""

KINDS = ("key", "value")


@attrs.frozen
class Seq2SeqLayout:
    """``layers`` decoder layers, each with a self-attention cache ``[1, heads, P, head_dim]``
    and cross-attention keys/values ``[1, cross_heads, T, cross_head_dim]``, in ``dtype``;
    ``input_name`` is the encoder's input (``input_ids`` or ``input_features``); ``stateful``:
    the decoder graph keeps its self-attention cache in tract's state."""

    layers: int
    heads: int
    head_dim: int
    cross_heads: int
    cross_head_dim: int
    dtype: torch.dtype
    input_name: str
    stateful: bool = False

    def cache_inputs(self) -> list[str]:
        return [f"in_cache_{kind}_{i}" for i in range(self.layers) for kind in KINDS]

    def cache_outputs(self) -> list[str]:
        return [f"out_cache_{kind}_{i}" for i in range(self.layers) for kind in KINDS]

    def cross_outputs(self) -> list[str]:
        """The encoder's outputs of projected cross-attention keys and values."""
        return [f"out_cross_{kind}_{i}" for i in range(self.layers) for kind in KINDS]

    def cross_inputs(self) -> list[str]:
        """The decoder's inputs each ``out_cross_*`` feeds (same order)."""
        return [f"in_cross_{kind}_{i}" for i in range(self.layers) for kind in KINDS]

    def feeds(self) -> dict[str, str]:
        """Encoder output → the decoder input it feeds."""
        return dict(zip(self.cross_outputs(), self.cross_inputs()))

    def encoder_outputs(self) -> list[str]:
        return [ENCODER_STATES, *self.cross_outputs()]

    def traced_decoder_inputs(self) -> list[str]:
        """The traced decoder module's inputs (the explicit form, before any interface pass)."""
        return ["input_ids", *self.cache_inputs(), *self.cross_inputs()]

    def traced_decoder_outputs(self) -> list[str]:
        return [LOGITS, *self.cache_outputs()]

    def cache_pairs(self) -> list[tuple[str, str]]:
        """(cache input, cache output) of each self-attention tensor, layer by layer."""
        return list(zip(self.cache_inputs(), self.cache_outputs()))

    def encoder_axes(self) -> dict[str, dict[int, str]]:
        """``T`` on the source tokens (the outputs follow it; audio: fixed)."""
        return {self.input_name: {1: "T"}} if self.input_name == "input_ids" else {}

    def decoder_axes(self) -> dict[str, dict[int, str]]:
        """``S`` on the new tokens, ``P`` on the cache, ``T`` on the cross keys/values."""
        return {"input_ids": {1: "S"}, **{n: {2: "P"} for n in self.cache_inputs()},
                **{n: {2: "T"} for n in self.cross_inputs()}}

    def empty_cache(self, past: int = 0, *, random: bool = False) -> list[torch.Tensor]:
        """Self-attention cache tensors of ``past`` tokens (zeros; ``random``: a trace example)."""
        make = torch.randn if random else torch.zeros
        return [make((1, self.heads, past, self.head_dim), dtype=self.dtype) for _ in self.cache_inputs()]

    def example_cross(self, length: int) -> list[torch.Tensor]:
        """Random cross-attention keys/values for ``length`` source positions (a trace example)."""
        return [torch.randn((1, self.cross_heads, length, self.cross_head_dim), dtype=self.dtype)
                for _ in self.cross_inputs()]
