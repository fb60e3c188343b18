"""The module traced for an LLM export: explicit past keys/values in, logits and the
grown keys/values out, so the graph has no hidden state and any runtime can hold the
cache. It builds a ``transformers`` ``DynamicCache`` from the past tensors and offsets
``position_ids`` by the past length ``P`` (rotary and learned positions both follow)."""

from __future__ import annotations

from typing import Any

import attrs
import torch


@attrs.frozen
class CacheLayout:
    """What the cache of a model looks like: one (key, value) pair per layer, each
    ``[B, kv_heads, P, head_dim]``, in ``dtype``. ``stateful``: the exported graph keeps
    it in tract's state (only ``input_ids`` in, ``outputs`` out); the traced wrapper
    always takes and returns it."""

    num_layers: int
    kv_heads: int
    head_dim: int
    dtype: torch.dtype
    stateful: bool = False
    value_head_dim: int | None = None
    """The values' last size when it differs from the keys' (DeepSeek's latent cache
    keeps the compressed keys/values in the key slot and the rotary keys in the value
    slot)."""

    @property
    def value_dim(self) -> int:
        return self.head_dim if self.value_head_dim is None else self.value_head_dim

    def input_names(self) -> list[str]:
        return ["input_ids"] + [f"in_cache_{kind}_{i}" for i in range(self.num_layers)
                                for kind in ("key", "value")]

    def output_names(self) -> list[str]:
        return ["outputs"] + [f"out_cache_{kind}_{i}" for i in range(self.num_layers)
                              for kind in ("key", "value")]

    def kv_pairs(self) -> list[tuple[str, str]]:
        """(cache input, cache output) names, layer by layer, key then value."""
        return list(zip(self.input_names()[1:], self.output_names()[1:]))

    def state_names(self) -> list[str]:
        """tract's names of the kept tensors of the stateful form."""
        from t2n.llm.stateful import STATE_PREFIX

        return [name.replace("in_cache", STATE_PREFIX, 1) for name in self.input_names()[1:]]

    def graph_input_names(self) -> list[str]:
        return ["input_ids"] if self.stateful else self.input_names()

    def graph_output_names(self) -> list[str]:
        return ["outputs"] if self.stateful else self.output_names()

    def empty_cache(self, past: int, batch: int = 1, *, random: bool = False) -> list[torch.Tensor]:
        make = torch.randn if random else torch.zeros
        return [make((batch, self.kv_heads, past, dim), dtype=self.dtype)
                for _ in range(self.num_layers) for dim in (self.head_dim, self.value_dim)]


def cache_layout(model: torch.nn.Module) -> CacheLayout:
    """Read the cache layout off one real step of ``model`` (whatever names its config
    uses for heads and sizes)."""
    device = next(model.parameters()).device
    with torch.no_grad():
        out = model(input_ids=torch.zeros((1, 1), dtype=torch.long, device=device), use_cache=True)
    layers = out.past_key_values.layers
    keys, values = layers[0].keys, layers[0].values
    value_dim = int(values.shape[3])
    return CacheLayout(len(layers), int(keys.shape[1]), int(keys.shape[3]), keys.dtype,
                       value_head_dim=None if value_dim == int(keys.shape[3]) else value_dim)


class KVCacheWrapper(torch.nn.Module):
    """``forward(input_ids, k_0, v_0, k_1, v_1, ...)`` → ``(logits, k_0', v_0', ...)``."""

    def __init__(self, model: torch.nn.Module, num_logits_to_keep: int | None = None) -> None:
        super().__init__()
        self.model = model
        self.num_logits_to_keep = num_logits_to_keep

    def forward(self, input_ids: torch.Tensor, *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
        from transformers import DynamicCache

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
        out = self.model(input_ids=input_ids, past_key_values=cache, position_ids=positions,
                         use_cache=True, **extra)
        grown: list[torch.Tensor] = []
        for layer in out.past_key_values.layers:
            grown += [layer.keys, layer.values]
        return (out.logits, *grown)
