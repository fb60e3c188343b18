"""Attention masks for a decoder whose image tokens attend each other both ways (Gemma
3): built from positions with comparisons, so they trace for any ``S`` and ``P``
(transformers' own builder runs ``vmap`` for such masks, which does not trace).

Text tokens are causal; the placeholder tokens of one image (a contiguous run in this
call) also see the later tokens of their run. An image's placeholder tokens are given in
one call (a prefill holds the whole image), as a runtime feeds them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    import transformers


def _bidirectional_runs(is_placeholder: torch.Tensor) -> torch.Tensor:
    """``[S, S]``: True where query and key are placeholders of the same run."""
    is_image = is_placeholder[0].to(torch.int64)
    previous = torch.cat([torch.zeros_like(is_image[:1]), is_image[:-1]])
    starts = is_image * (1 - previous)
    group = torch.cumsum(starts, dim=0) * is_image  # 0 for text, k for the k-th run
    same = group.unsqueeze(1) == group.unsqueeze(0)
    return same & (group.unsqueeze(1) > 0)


def mask_mapping(is_placeholder: torch.Tensor, past_length: int,
                 config: transformers.PretrainedConfig, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """``{"full_attention": ..., "sliding_attention": ...}``, ``[1, 1, S, P + S]`` each, for
    the ``[1, S]`` tokens of a call (``is_placeholder``: the image tokens): boolean (True:
    attend) for SDPA, additive (0 or the dtype's minimum) for eager. ``past_length``: the
    cache's ``shape[2]`` (an int as torch types sizes; while tracing, a symbolic size)."""
    length = is_placeholder.shape[1]
    device = is_placeholder.device
    queries = torch.arange(length, device=device).unsqueeze(1) + past_length
    keys = torch.arange(length + past_length, device=device).unsqueeze(0)
    runs = _bidirectional_runs(is_placeholder)
    past_cols = (keys[:, :past_length] < 0) & (queries >= 0)  # [S, P]: no run reaches the cache
    both_ways = torch.cat([past_cols, runs], dim=1)
    full = (keys <= queries) | both_ways
    masks = {"full_attention": full}
    window = getattr(config, "sliding_window", None)
    if window is not None:
        masks["sliding_attention"] = full & (keys > queries - int(window))
    if getattr(config, "_attn_implementation", "sdpa") == "eager":
        low = torch.finfo(dtype).min
        return {k: torch.where(m, 0.0, low).to(dtype)[None, None] for k, m in masks.items()}
    return {k: m[None, None] for k, m in masks.items()}
