"""Qwen2.5-VL's and Qwen3-VL's 3-D rotary positions (temporal, height, width), computed
in the graph from the tokens of the call and each image row's place in its image.

A text token's three positions are equal; an image's tokens take the position ``s`` of
its first token on the temporal axis and ``s + row`` / ``s + column`` of the merged
patch grid on the others; the text after an image continues at ``s + max(rows,
columns)``. So each image shifts the later positions by ``max(rows, columns) - rows *
columns``: the decoder takes that running shift as ``in_rope_delta`` (``[1]``, int64, 0
for a new sequence) and returns it grown by the images of the call as ``out_rope_delta``
(a runtime feeds it back like the cache). The grid of each image comes with its rows:
the encoder returns ``out_image_positions`` (``[N, 4]`` int64: row, column, rows,
columns of each row's merged patch), which the decoder takes as ``in_image_positions``,
so images of any size (and several sizes in one call) are placed as transformers'
``get_rope_index`` places them. An image's tokens are given in one call."""

from __future__ import annotations

from collections.abc import Callable

import torch

DELTA_IN, DELTA_OUT = "in_rope_delta", "out_rope_delta"


def mrope_positions(is_placeholder: torch.Tensor, past_length: int, delta: torch.Tensor,
                    grid_rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(``[3, 1, S]`` positions, ``[1]`` shift after this call) for the ``[1, S]`` tokens of
    a call (``is_placeholder``: those that take an image row) after ``past_length`` cached
    tokens (the cache's ``shape[2]``: a symbolic size while tracing), ``delta`` the shift
    of the images before them, ``grid_rows`` ``[N, 4]`` the (row, column, rows, columns)
    of each image row.

    Each image token moves the later text by -1, and an image's first token by
    ``max(rows, columns)`` more: a running sum of those gives every token's text position;
    an image token's start ``s`` is its text position less ``max(rows, columns)`` (but the
    first token's, which is ``s``)."""
    is_image = is_placeholder[0].to(torch.int64)
    order = torch.cumsum(is_image, dim=0) * is_image  # 1 + the row of an image token, 0 else
    table = torch.cat([torch.zeros((1, 4), dtype=torch.int64, device=is_image.device),
                       grid_rows.to(torch.int64)], dim=0)
    picked = torch.index_select(table, 0, order)
    row, column = picked[:, 0], picked[:, 1]
    extent = torch.maximum(picked[:, 2], picked[:, 3])
    first = is_image * (row == 0).to(torch.int64) * (column == 0).to(torch.int64)
    moved = first * extent - is_image
    before = torch.cumsum(moved, dim=0) - moved
    index = torch.arange(is_image.shape[0], device=is_image.device)
    text = index + past_length + delta + before
    start = text - extent * (is_image - first)
    image = is_image.bool()
    positions = torch.stack([torch.where(image, start, text), torch.where(image, start + row, text),
                             torch.where(image, start + column, text)]).unsqueeze(1)
    grown = delta + moved.sum()
    return positions, grown.reshape(1)


def interleaved_frequencies(section: list[int]) -> Callable[[torch.Tensor], torch.Tensor]:
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
