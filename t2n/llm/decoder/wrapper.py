"""The module traced for an LLM export: explicit past keys/values in, logits and the
grown keys/values out, so the graph has no hidden state and any runtime can hold the
cache. It builds a ``transformers`` ``DynamicCache`` from the past tensors and offsets
``position_ids`` by the past length ``P`` (rotary and learned positions both follow).

Hybrid models (linear attention, state-space layers) also take and return each
recurrent layer's fixed-size states (``in_cache_conv_{i}``, ``in_cache_recurrent_{i}``):
see :mod:`t2n.llm.decoder.recurrent_state`."""

from __future__ import annotations

from typing import Any

import torch

from t2n.llm.common.cache_api import cache_keyword, returned_cache
from t2n.llm.common.layout import CacheLayout, StateSpec
from t2n.llm.decoder.text_rotary import text_rotary

__all__ = ["CacheLayout", "KVCacheWrapper", "StateSpec", "cache_layout"]


def cache_layout(model: torch.nn.Module) -> CacheLayout:
    """Read the cache layout off one real step of ``model`` (whatever names its config
    uses for heads and sizes, and whichever layers hold keys or recurrent states)."""
    from t2n.llm.decoder.recurrent_state import StateMixers, recurrent_states

    parameter = next(model.parameters())
    # a hybrid model built on the meta device may hold real buffers (Falcon-H1's MuP
    # vector): its step runs on zero stand-ins of the weights, which cost no memory; so
    # does a model whose computed buffer meets the meta weights (GPT-J's rotary table,
    # transformers 5.25 and later)
    real = parameter.is_meta and StateMixers.find(model) is not None
    try:
        out = _one_step(model, real)
    except RuntimeError as exc:
        if not parameter.is_meta or real or "meta" not in str(exc):
            raise
        out = _one_step(model, True)
    cache: Any = returned_cache(out)
    layers = cache.layers
    kv = [i for i, layer in enumerate(layers) if getattr(layer, "keys", None) is not None]
    states = recurrent_states(layers)
    if not kv:
        return CacheLayout(len(layers), 0, 0, parameter.dtype, kv_layers=(), states=states)
    keys, values = layers[kv[0]].keys, layers[kv[0]].values
    value_dim = int(values.shape[3])
    return CacheLayout(len(layers), int(keys.shape[1]), int(keys.shape[3]), keys.dtype,
                       kv_layers=None if len(kv) == len(layers) else tuple(kv), states=states,
                       value_head_dim=None if value_dim == int(keys.shape[3]) else value_dim)


def _one_step(model: torch.nn.Module, on_stand_ins: bool) -> object:
    """``model``'s output for one token with a cache, on the weights' device or, with
    ``on_stand_ins``, on the CPU with zero stand-ins of its meta tensors."""
    import contextlib

    from t2n.frontend.meta_trace import stand_ins

    device = "cpu" if on_stand_ins else next(model.parameters()).device
    with torch.no_grad(), stand_ins(model) if on_stand_ins else contextlib.nullcontext():
        return model(input_ids=torch.zeros((1, 1), dtype=torch.long, device=device), use_cache=True)


class KVCacheWrapper(torch.nn.Module):
    """``forward(input_ids, k_0, v_0, k_1, v_1, ...)`` → ``(logits, k_0', v_0', ...)``."""

    def __init__(self, model: torch.nn.Module, num_logits_to_keep: int | None = None,
                 layout: CacheLayout | None = None) -> None:
        from t2n.llm.decoder.recurrent_state import StateMixers

        super().__init__()
        self.model = model
        self.num_logits_to_keep = num_logits_to_keep
        if layout is None and StateMixers.find(model) is not None:
            layout = cache_layout(model)
        self.layout = layout
        self.mixers = StateMixers.for_layout(model, layout) if layout is not None and layout.states else None

    def forward(self, input_ids: torch.Tensor, *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
        from transformers import DynamicCache

        if self.mixers is not None and self.layout is not None:
            return self.mixers.forward(self.model, self.layout, input_ids, past, self.num_logits_to_keep)

        pairs = [(past[2 * i], past[2 * i + 1]) for i in range(len(past) // 2)]
        # Full layers for every model: a sliding-window layer crops the cache with its
        # window as a constant size; the attention mask, built from the config, still
        # keeps each token to its window, so the outputs are the same.
        cache = DynamicCache(ddp_cache_data=pairs)
        past_length = past[0].shape[2]
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0) + past_length
        extra: dict[str, Any] = {}
        if self.num_logits_to_keep is not None:
            extra["logits_to_keep"] = self.num_logits_to_keep
        extra[cache_keyword(self.model)] = cache
        with text_rotary(self.model):
            out = self.model(input_ids=input_ids, position_ids=positions, use_cache=True, **extra)
        grown: list[torch.Tensor] = []
        cache_out: Any = returned_cache(out)  # the DynamicCache given, grown
        for layer in cache_out.layers:
            grown += [layer.keys, layer.values]
        return (out.logits, *grown)
