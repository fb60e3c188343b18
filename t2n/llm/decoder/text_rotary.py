"""Rotary embeddings of multimodal-ready text decoders (Qwen3.5, Qwen3.5-MoE, Cohere Compass)
run on text.

Their rotary module computes frequencies for three position axes (temporal, height,
width) and recomposes them channel by channel with strided in-place assignments
(``recomposition_frequencies``), which trace to sizes baked at the traced length. On
text the three axes hold the same positions (the model expands its 2-D ``position_ids``),
so the recomposition is the temporal axis's frequencies alone: :func:`text_rotary`
writes it so for the wrapper's call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

TEXT_ROTARIES = ("Qwen3_5TextRotaryEmbedding", "Qwen3_5MoeTextRotaryEmbedding", "CohereCompassRotaryEmbedding")
"""The rotary classes whose ``recomposition_frequencies(freq[, layer_type])`` interleaves the
three axes' channels over ``cat((f, f), -1)`` (so that equal axes give ``cat((freq[0],
freq[0]), -1)``); another family's joins this list once its tests prove it so."""


def _text_recomposition(freq: torch.Tensor, *layer_type: str) -> torch.Tensor:
    """``recomposition_frequencies`` of ``[3, B, S, D/2]`` frequencies whose three axes are
    equal (whatever the layer type: the sections differ, the channels taken do not)."""
    return torch.cat((freq[0], freq[0]), dim=-1)


@contextlib.contextmanager
def text_rotary(model: torch.nn.Module) -> Iterator[None]:
    """For the block's duration, the rotary modules of ``model`` of :data:`TEXT_ROTARIES`
    take the temporal axis's frequencies (the instances' own method after)."""
    patched = [module for module in model.modules() if type(module).__name__ in TEXT_ROTARIES]
    for module in patched:
        object.__setattr__(module, "recomposition_frequencies", _text_recomposition)  # the instance's, not a submodule
    try:
        yield
    finally:
        for module in patched:
            del module.recomposition_frequencies
