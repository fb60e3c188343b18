"""Qwen2.5-VL's 3-D rotary positions (temporal, height, width), computed in the graph
from the tokens of the call, for images of the grid fixed at export.

A text token's three positions are equal; an image's tokens take the position ``s`` of
its first token on the temporal axis and ``s + row`` / ``s + column`` of the merged
patch grid on the others; the text after an image continues at ``s + max(rows,
columns)``. So each image shifts the later positions by ``max(rows, columns) - rows *
columns``: the decoder takes that running shift as ``in_rope_delta`` (``[1]``, int64, 0
for a new sequence) and returns it grown by the images of the call as ``out_rope_delta``
(a runtime feeds it back like the cache). An image's tokens are given in one call."""

from __future__ import annotations

from typing import Any

import torch

DELTA_IN, DELTA_OUT = "in_rope_delta", "out_rope_delta"


def mrope_positions(is_placeholder: torch.Tensor, past_length: Any, delta: torch.Tensor,
                    grid: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(``[3, 1, S]`` positions, ``[1]`` shift after this call) for the ``[1, S]`` tokens of
    a call (``is_placeholder``: those that take an image row) after ``past_length`` cached
    tokens, ``delta`` the shift of the images before them."""
    rows, columns = grid
    per_image = rows * columns
    shift = max(rows, columns) - per_image
    is_image = is_placeholder[0].to(torch.int64)
    before = torch.cumsum(is_image, dim=0) - is_image  # image tokens before each token
    index = torch.arange(is_image.shape[0], device=is_image.device)
    text = index + past_length + delta + torch.div(before, per_image, rounding_mode="floor") * shift
    within = before - torch.div(before, per_image, rounding_mode="floor") * per_image
    start = text - within  # the image's first token's position
    row = start + torch.div(within, columns, rounding_mode="floor")
    column = start + within - torch.div(within, columns, rounding_mode="floor") * columns
    image = is_image.bool()
    positions = torch.stack([torch.where(image, start, text), torch.where(image, row, text),
                             torch.where(image, column, text)]).unsqueeze(1)
    grown = delta + torch.div(is_image.sum(), per_image, rounding_mode="floor") * shift
    return positions, grown.reshape(1)


def interleaved_frequencies(section: list[int]) -> Any:
    """Qwen3-VL's recomposition of the ``[3, B, S, D/2]`` rotary frequencies (channel
    ``c`` from the height axis when ``c % 3 == 1`` and ``c < 3 * section[1]``, from the
    width axis when ``c % 3 == 2`` and ``c < 3 * section[2]``, else from the temporal
    axis), as a selection by constant masks: the model writes it by strided in-place
    assignments, which trace to sizes baked at the traced length."""

    def recompose(freq: torch.Tensor) -> torch.Tensor:
        channel = torch.arange(freq.shape[-1], device=freq.device)
        height = (channel % 3 == 1) & (channel < 3 * section[1])
        width = (channel % 3 == 2) & (channel < 3 * section[2])
        out = torch.where(height, freq[1], torch.where(width, freq[2], freq[0]))
        return torch.cat((out, out), dim=-1)

    return recompose
