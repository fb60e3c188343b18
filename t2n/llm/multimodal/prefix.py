"""PaliGemma's prefix-LM decoder: on the first call of a sequence (the prefill, whose tokens
the processor marks ``token_type_ids`` 0: the image tokens and the prompt) every token
attends every other both ways; later calls (each generated token) attend causally.
Positions count from 1.

The mask is computed from the call's sizes inside the graph, never by a Python branch:
the first call is the one whose past length ``P`` is 0, so ``arange(S) + P`` has 0 at its
first element there and only there. The explicit graph reads ``P`` from the cache input's
shape, the stateful one from tract's state (0 before the first run)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from t2n.llm.common.cache_api import CACHE_KEYWORDS, cache_keyword, returned_cache

if TYPE_CHECKING:
    import transformers
    from transformers.modeling_outputs import CausalLMOutputWithPast


def prefix_masks(length: int, past_length: int, config: transformers.PretrainedConfig, dtype: torch.dtype,
                 device: torch.device | None = None) -> dict[str, torch.Tensor]:
    """``{"full_attention": ..., "sliding_attention": ...}`` (the second for a config with
    a sliding window), ``[1, 1, S, P + S]`` each for a call of ``length`` tokens after
    ``past_length`` (sizes, symbolic while tracing): causal (and within the window) or,
    on the first call, both ways over the whole call, as transformers' blockwise overlay
    of the prefix ORs it over the causal (and sliding) mask. Boolean (True: attend) for
    SDPA, additive (0 or the dtype's minimum) for eager."""
    queries = torch.arange(length, device=device).unsqueeze(1) + past_length
    keys = torch.arange(length + past_length, device=device).unsqueeze(0)
    first = queries[:1] == 0  # [1, 1]: True on the call without a past only
    causal = keys <= queries
    masks = {"full_attention": causal | first}
    window = getattr(config, "sliding_window", None)
    if window is not None:
        masks["sliding_attention"] = (causal & (keys > queries - int(window))) | first
    if getattr(config, "_attn_implementation", "sdpa") == "eager":
        low = torch.finfo(dtype).min
        return {k: torch.where(m, 0.0, low).to(dtype)[None, None] for k, m in masks.items()}
    return {k: m[None, None] for k, m in masks.items()}


def forward_prefix_lm(model: transformers.PreTrainedModel, embeds: torch.Tensor, num_logits_to_keep: int | None,
                      *, position_ids: torch.Tensor, cache: transformers.Cache, past_length: int
                      ) -> CausalLMOutputWithPast:
    """PaliGemma's language model and head on ``embeds`` at ``position_ids`` (already
    1-indexed), growing ``cache`` (holding ``past_length`` tokens), with :func:`prefix_masks`; an output with ``logits``
    (of the last ``num_logits_to_keep`` positions, None: all; Gemma 2's final soft-capping
    applied) and the cache (under this release's name: see cache_api). The model's own
    ``forward`` rebuilds its masks from ``token_type_ids`` (a ``vmap`` that does not
    trace) and passes Gemma one mask for every layer, so its language model is called
    here with the masks of each layer kind."""
    from transformers.modeling_outputs import CausalLMOutputWithPast

    language = model.model.language_model
    text_config = model.config.get_text_config()
    masks = prefix_masks(embeds.shape[1], past_length, text_config, embeds.dtype, embeds.device)
    # Gemma 2 takes a mask per layer kind; Gemma takes one (its full attention's)
    mask: dict[str, torch.Tensor] | torch.Tensor = masks if "sliding_attention" in masks else masks["full_attention"]
    out = language(inputs_embeds=embeds, attention_mask=mask, position_ids=position_ids, use_cache=True,
                   **{cache_keyword(language): cache})
    hidden = out.last_hidden_state
    if num_logits_to_keep is not None:
        hidden = hidden[:, -num_logits_to_keep:]
    logits = model.lm_head(hidden)
    capping = getattr(text_config, "final_logit_softcapping", None)
    if capping is not None:
        logits = torch.tanh(logits / capping) * capping
    field = next(n for n in CACHE_KEYWORDS if n in CausalLMOutputWithPast.__dataclass_fields__)
    result = CausalLMOutputWithPast(logits=logits)
    setattr(result, field, returned_cache(out))  # a field set (not None) is also a key, as given to the constructor
    return result
