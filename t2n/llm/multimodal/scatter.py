"""The decoder's side of a multimodal model: the encoders' embeddings written into the
token embeddings at the placeholder tokens, inside the graph.

``in_image_embeddings`` holds one row per placeholder token of *this call*, in order
(``[0, hidden]`` when the call has none: a text-only prompt, a decode step). Row ``k``
replaces the ``k``-th placeholder: a cumulative count of the placeholders picks the
row from the embeddings with a zero row in front (the row every other token picks),
so the graph has no data-dependent shape and needs no ``masked_scatter``."""

from __future__ import annotations

import torch


def placeholder_mask(input_ids: torch.Tensor, placeholder: int, rows: torch.Tensor) -> torch.Tensor:
    """``[1, S]``: the placeholder tokens that take a row, the first ``N`` (``rows``:
    ``[N, H]``). A placeholder id beyond them (a token the model generated, fed back in a
    decode step) is embedded as the text token it is, as transformers does."""
    is_placeholder = input_ids == placeholder
    count = torch.cumsum(is_placeholder.to(torch.int64), dim=1)
    return is_placeholder & (count <= rows.shape[0])


def scatter_at_placeholders(embeds: torch.Tensor, is_placeholder: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``embeds`` ``[1, S, H]`` with the ``k``-th token of ``is_placeholder`` (see
    :func:`placeholder_mask`) replaced by ``rows[k]`` (``rows``: ``[N, H]``)."""
    order = torch.cumsum(is_placeholder.to(torch.int64), dim=1) * is_placeholder.to(torch.int64)
    table = torch.cat([embeds.new_zeros((1, embeds.shape[-1])), rows.to(embeds.dtype)], dim=0)
    picked = torch.index_select(table, 0, order.reshape(-1)).reshape(embeds.shape)
    return torch.where(is_placeholder.unsqueeze(-1), picked, embeds)


def text_ids(input_ids: torch.Tensor, placeholder: int, vocab: int) -> torch.Tensor:
    """The ids to embed: a placeholder outside the text vocabulary (Gemma 3's image
    token) is looked up as token 0, its row replaced afterwards."""
    if placeholder < vocab:
        return input_ids
    return torch.where(input_ids == placeholder, torch.zeros_like(input_ids), input_ids)
