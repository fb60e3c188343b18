"""The modules traced for a multimodal export: the encoder (raw input in, one embedding
row per placeholder token out) and the decoder (tokens, the explicit KV cache and the
embeddings of this call's placeholder tokens in; logits and the grown cache out)."""

from __future__ import annotations

from typing import Any

import torch

from t2n.llm.common.cache_api import cache_keyword, returned_cache
from t2n.llm.multimodal.family import Family
from t2n.llm.multimodal.scatter import placeholder_mask, scatter_at_placeholders, text_ids


class EncoderWrapper(torch.nn.Module):
    """``forward(*raw)`` → ``[N, hidden]``: the model's own features for the decoder,
    the rows of every image (or audio clip) one after the other."""

    def __init__(self, model: torch.nn.Module, family: Family, size: tuple[int, int] | None = None) -> None:
        super().__init__()
        self.model = model
        self.family = family
        self.size = size
        """The image size (height, width) of a family fixed to one size (None: its default)."""
        self.fixed = family.fixed_inputs(model, size) if family.fixed_inputs is not None else {}
        """What the encoder takes that depends only on that size, computed now (before a trace)."""

    def forward(self, *raw: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        sized = {"size": self.size} if self.family.default_size is not None else {}
        features = self.family.encode(self.model, *raw, **sized, **self.fixed)
        if isinstance(features, tuple):  # the embeddings, the DeepStack streams, the grid positions
            return tuple(f.reshape(-1, f.shape[-1]) for f in features)
        return features.reshape(-1, features.shape[-1])


class EmbeddingsDecoder(torch.nn.Module):
    """``forward(input_ids, k_0, v_0, ..., [rope_delta,] embeddings, [deepstack_0, ...,] [positions])`` →
    ``(logits, k_0', v_0', ...
    [, rope_delta'])`` (the shift of 3-D rotary positions: see :mod:`t2n.llm.multimodal.mrope`):
    the model's decoder on the token embeddings with ``embeddings`` written at the
    placeholder tokens (see :mod:`t2n.llm.multimodal.scatter`); the logits of the last
    ``num_logits_to_keep`` positions (None: every position's)."""

    def __init__(self, model: torch.nn.Module, family: Family, placeholder: int,
                 num_logits_to_keep: int | None = None) -> None:
        super().__init__()
        self.model = model
        self.family = family
        self.placeholder = placeholder
        self.num_logits_to_keep = num_logits_to_keep

    def _split_inputs(self, rest: tuple[torch.Tensor, ...]) -> tuple[
            list[torch.Tensor], torch.Tensor | None, torch.Tensor, list[torch.Tensor], torch.Tensor | None]:
        """The inputs after ``input_ids``, in the order of the class docstring: the cache,
        the rotary shift (Qwens), the encoder's rows, the DeepStack features and each row's
        place in its image (Qwens)."""
        grid_rows = None
        if self.family.grid is not None:  # each row's place in its image: the last input
            *others, grid_rows = rest
            rest = tuple(others)
        streams = self.family.deepstack(self.model) if self.family.deepstack is not None else 0
        deep = list(rest[len(rest) - streams:])
        rest = rest[:len(rest) - streams]
        delta = None
        if self.family.grid is not None:
            *past, delta, rows = rest
        else:
            *past, rows = rest
        return past, delta, rows, deep, grid_rows

    def forward(self, input_ids: torch.Tensor, *rest: torch.Tensor) -> tuple[torch.Tensor, ...]:
        from transformers import DynamicCache

        past, delta, rows, deep, grid_rows = self._split_inputs(rest)
        model: Any = self.model
        table = model.get_input_embeddings()
        embeds = table(text_ids(input_ids, self.placeholder, int(table.weight.shape[0])))
        is_placeholder = placeholder_mask(input_ids, self.placeholder, rows)
        embeds = scatter_at_placeholders(embeds, is_placeholder, rows)
        cache = DynamicCache(ddp_cache_data=[(past[2 * i], past[2 * i + 1]) for i in range(len(past) // 2)])
        past_length = past[0].shape[2]
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0) + past_length
        if self.family.first_position:  # PaliGemma's positions count from 1
            positions = positions + self.family.first_position
        grown_delta: tuple[torch.Tensor, ...] = ()
        if delta is not None and grid_rows is not None:  # 3-D rotary positions
            from t2n.llm.multimodal.mrope import mrope_positions

            positions, new_delta = mrope_positions(is_placeholder, past_length, delta, grid_rows)
            grown_delta = (new_delta,)
        out = self._decode(embeds, is_placeholder, deep, positions, cache, past_length)
        grown: list[torch.Tensor] = []
        cache_out: Any = returned_cache(out)  # the DynamicCache given, grown
        for layer in cache_out.layers:
            grown += [layer.keys, layer.values]
        logits = out.logits
        assert logits is not None  # a causal LM always returns its logits
        if self.num_logits_to_keep and not _keeps_logits(model):
            logits = logits[:, -self.num_logits_to_keep:]
        return (logits, *grown, *grown_delta)

    def _decode(self, embeds: torch.Tensor, is_placeholder: torch.Tensor, deep: list[torch.Tensor],
                positions: torch.Tensor, cache: Any, past_length: int) -> Any:
        """The model's forward on the embeddings: with the DeepStack streams added, as a
        prefix LM, or as it is (image tokens attending each other both ways where the
        family asks it)."""
        model: Any = self.model
        extra: dict[str, Any] = {}
        if self.num_logits_to_keep is not None:
            extra["logits_to_keep"] = self.num_logits_to_keep
        if self.family.token_types:  # the image tokens of this call attend each other both ways
            from t2n.llm.multimodal.masks import mask_mapping

            extra["attention_mask"] = mask_mapping(is_placeholder, past_length, model.config.get_text_config(),
                                                   embeds.dtype)
        if deep:
            from t2n.llm.multimodal.deepstack import forward_with_deepstack

            out = forward_with_deepstack(model, embeds, is_placeholder, deep, self.num_logits_to_keep,
                                         position_ids=positions, cache=cache)
        elif self.family.prefix_lm:  # the first call both ways, later ones causal
            from t2n.llm.multimodal.prefix import forward_prefix_lm

            out = forward_prefix_lm(model, embeds, self.num_logits_to_keep, position_ids=positions, cache=cache,
                                    past_length=past_length)
        else:
            extra[cache_keyword(model)] = cache
            out = model(inputs_embeds=embeds, position_ids=positions, use_cache=True, **extra)
        return out


def _keeps_logits(model: torch.nn.Module) -> bool:
    """Whether the model's forward takes ``logits_to_keep`` (Qwen2-Audio's passes it to its
    text model, which ignores it, and returns every position's logits: they are cut here)."""
    import inspect

    return "logits_to_keep" in inspect.signature(model.forward).parameters
