"""The record every multimodal family fills (:class:`Family`) and the helpers the family
modules share: the projected features of a ``get_*_features`` call, where a prompt holds
the image token."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import torch


def pooled(features: object) -> torch.Tensor:
    """The projected features of a ``get_*_features`` call (an output object or a tensor)."""
    out = getattr(features, "pooler_output", features)
    if isinstance(out, (list, tuple)):
        return torch.cat(list(out), dim=0)
    assert isinstance(out, torch.Tensor)
    return out


ForwardInputs = Callable[[torch.nn.Module, tuple[torch.Tensor, ...], torch.Tensor, "tuple[int, int] | None"],
                         dict[str, torch.Tensor]]
"""``(model, example, input_ids, size)`` → the keywords beside ``input_ids`` with which the
model's own ``forward`` takes the encoder's raw input ``example`` (of the image ``size``)."""


@attrs.frozen
class Family:
    """One multimodal family: ``modality`` (``image``, ``audio``), the config field of the
    placeholder token, the encoder's input names and example inputs (from the model),
    the encoder call, the dynamic axes of those inputs, and whether image tokens attend
    each other both ways (passed to the decoder as ``token_type_ids``)."""

    name: str
    modality: str
    placeholder_attr: str
    input_names: tuple[str, ...]
    example: Callable[..., tuple[torch.Tensor, ...]]
    """The example input (from the model, and the image size of a sized family)."""
    encode: Callable[..., torch.Tensor | tuple[torch.Tensor, ...]]
    dynamic_axes: dict[str, dict[int, str]] = attrs.field(factory=dict)
    token_types: bool = False
    fixed: str = ""
    """What the encoder's artifact fixes at export (said in the manifest), if anything."""
    deepstack: Callable[[torch.nn.Module], int] | None = None
    """How many DeepStack streams the encoder also returns (Qwen3-VL): the ``i``-th is
    added at the placeholder tokens to the output of decoder layer ``i``."""
    grid: Callable[[torch.nn.Module], tuple[int, int]] | None = None
    """The merged patch grid (rows, columns) of the default image, for a decoder with 3-D
    rotary positions (Qwen2.5-VL, Qwen3-VL): the encoder then also returns each row's
    place in its image, ``out_image_positions`` (see :mod:`t2n.llm.multimodal.mrope`)."""
    default_size: Callable[[torch.nn.Module], tuple[int, int]] | None = None
    """The image size (height, width in pixels) of the default encoder, for a family whose
    encoder is fixed to one size (one artifact per size of ``image_sizes``)."""
    check_size: Callable[[torch.nn.Module, tuple[int, int]], str] | None = None
    """Why an image size cannot be exported ("" when it can)."""
    size_symbols: Callable[[torch.nn.Module], dict[str, dict[str, int]]] | None = None
    """For an encoder whose image height and width are symbols of one artifact (the
    symbols of ``dynamic_axes``): each symbol's ``min``, ``max`` and ``multiple_of``
    pixels. ``image_sizes`` then writes no encoder per size: the one encoder is checked
    at each of them."""
    fixed_inputs: Callable[[torch.nn.Module, tuple[int, int] | None], dict[str, torch.Tensor]] | None = None
    """Keywords of ``encode`` that depend only on the image size fixed at export, computed
    before the trace by the model's library (Qwen2.5-VL's window partition: its boolean
    selection of a grid's windows would otherwise be traced)."""
    forward_inputs: ForwardInputs | None = None
    """``(model, example, input_ids, size)`` → the keywords beside ``input_ids`` with which
    the model's own ``forward`` (the reference an export is checked against) takes the
    encoder's raw input ``example`` (of the image ``size``), as the family's processor
    gives them."""
    prefix_lm: bool = False
    """The first call of a sequence (the prompt: image tokens and text, ``token_type_ids``
    0 from the processor) attends both ways, later calls causally (PaliGemma; see
    :mod:`t2n.llm.multimodal.prefix`). The reference then takes ``token_type_ids``: 0 for
    the prompt, 1 for the tokens after it."""
    first_position: int = 0
    """The position of a sequence's first token (PaliGemma counts from 1)."""
    rows: str = ""
    """How many rows an input gives, for an encoder that computes it from the data
    (Qwen2-Audio: from each clip's mask); written on the manifest's embeddings output."""
    preprocess: tuple[dict[str, str | float | list[int]], ...] = ()
    """Rules a runtime applies, in order, to the processor's outputs before the encoder, as
    data for the manifest (``preprocess``; see :data:`PREPROCESS_RULES`)."""
    several_images: Callable[[torch.nn.Module], dict[str, int]] | None = None
    """How an image of a prompt of several is encoded when the model takes it otherwise than
    alone (LLaVA-OneVision: its base tile only), as data for the manifest (``several_images``)."""


def placeholders(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """Where the prompt holds the model's image token (1) or not (0)."""
    config: Any = model.config
    return (ids == int(config.image_token_id)).long()


__all__ = ["Family", "ForwardInputs", "placeholders", "pooled"]
