"""Qwen3-VL's DeepStack: beside the embeddings written at the placeholder tokens, the
encoder returns one more stream of rows per DeepStack layer of its tower; the ``i``-th is
added at the placeholder tokens to the output of decoder layer ``i``. The model adds them
with boolean-mask indexing (a data-dependent shape); here they are written with the
placeholder scatter onto zeros and added, the same sums."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from t2n.llm.common.cache_api import CACHE_KEYWORDS, cache_keyword, returned_cache
from t2n.llm.multimodal.mrope import interleaved_frequencies
from t2n.llm.multimodal.scatter import scatter_at_placeholders

if TYPE_CHECKING:
    import transformers
    from transformers.modeling_outputs import CausalLMOutputWithPast


def forward_with_deepstack(model: transformers.PreTrainedModel, embeds: torch.Tensor, is_placeholder: torch.Tensor,
                           streams: list[torch.Tensor], num_logits_to_keep: int | None = None, *,
                           position_ids: torch.Tensor, cache: transformers.Cache) -> CausalLMOutputWithPast:
    """The model's decoder and head on ``embeds`` at ``position_ids``, growing ``cache``,
    with ``streams`` added after its first layers; an output with ``logits`` (of the last
    ``num_logits_to_keep`` positions, None: all) and the cache (under this release's name:
    see cache_api)."""
    from transformers.modeling_outputs import CausalLMOutputWithPast

    language = model.model.language_model

    def add_rows(hidden: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        return hidden + scatter_at_placeholders(torch.zeros_like(hidden), mask, rows)

    rotary = language.rotary_emb
    # this call only (the instances' own methods after): the DeepStack sums, and the
    # interleaved rotary frequencies written as a selection (see mrope)
    language._deepstack_process = add_rows
    rotary.recomposition_frequencies = interleaved_frequencies(list(rotary.mrope_section))
    try:
        out = language(inputs_embeds=embeds, visual_pos_masks=is_placeholder, deepstack_visual_embeds=streams,
                       position_ids=position_ids, use_cache=True, **{cache_keyword(language): cache})
    finally:
        del language._deepstack_process
        del rotary.recomposition_frequencies
    hidden = out.last_hidden_state
    if num_logits_to_keep is not None:
        hidden = hidden[:, -num_logits_to_keep:]
    field = next(n for n in CACHE_KEYWORDS if n in CausalLMOutputWithPast.__dataclass_fields__)
    result = CausalLMOutputWithPast(logits=model.lm_head(hidden))
    setattr(result, field, returned_cache(out))  # a field set (not None) is also a key, as given to the constructor
    return result
