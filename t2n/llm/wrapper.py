"""The module traced for an LLM export: explicit past keys/values in, logits and the
grown keys/values out, so the graph has no hidden state and any runtime can hold the
cache. It builds a ``transformers`` ``DynamicCache`` from the past tensors and offsets
``position_ids`` by the past length ``P`` (rotary and learned positions both follow).

Hybrid models (linear attention, state-space layers) also take and return each
recurrent layer's fixed-size states (``in_cache_conv_{i}``, ``in_cache_recurrent_{i}``):
see :mod:`t2n.llm.recurrent_state`."""

from __future__ import annotations

from typing import Any

import attrs
import torch


@attrs.frozen
class StateSpec:
    """One fixed-size state of a recurrent layer: ``kind`` (``conv``: the last inputs of
    its causal convolution; ``recurrent``: its linear-attention or state-space state),
    the ``layer`` index, its ``shape`` without the batch axis, its ``dtype``."""

    kind: str
    layer: int
    shape: tuple[int, ...]
    dtype: torch.dtype


@attrs.frozen
class CacheLayout:
    """What the cache of a model looks like: one (key, value) pair per attention layer,
    each ``[B, kv_heads, P, head_dim]``, in ``dtype``; ``kv_layers`` names those layers
    (None: every layer). Hybrid models add the fixed-size ``states`` of their recurrent
    layers. Layer by layer, the cache tensors are: key, value, then the layer's states.
    ``stateful``: the exported graph keeps the keys and values in tract's state (only
    ``input_ids`` in, ``outputs`` out); the traced wrapper always takes and returns them."""

    num_layers: int
    kv_heads: int
    head_dim: int
    dtype: torch.dtype
    stateful: bool = False
    kv_layers: tuple[int, ...] | None = None
    states: tuple[StateSpec, ...] = ()
    kv_bits: int = 0
    """Stateful only: 8 or 4 when tract keeps the keys and values quantized."""
    windows: tuple[tuple[int, int], ...] = ()
    """Stateful only: (layer, window) of the layers whose cache keeps only a window."""

    def has_kv(self, layer: int) -> bool:
        return self.kv_layers is None or layer in self.kv_layers

    def entries(self) -> list[tuple[str, int]]:
        """(kind, layer) of each cache tensor, in the order of the graph's inputs."""
        out: list[tuple[str, int]] = []
        for layer in range(self.num_layers):
            if self.has_kv(layer):
                out += [("key", layer), ("value", layer)]
            out += [(s.kind, layer) for s in self.states if s.layer == layer]
        return out

    def input_names(self) -> list[str]:
        return ["input_ids"] + [f"in_cache_{kind}_{i}" for kind, i in self.entries()]

    def dtypes(self) -> list[torch.dtype]:
        """The dtype of each cache tensor, in the order of :meth:`entries`."""
        specs = {(s.kind, s.layer): s.dtype for s in self.states}
        return [specs.get(entry, self.dtype) for entry in self.entries()]

    def dynamic_axes(self) -> dict[str, dict[int, str]]:
        """``S`` on the tokens, ``P`` on the keys' and values' past axis (states have none)."""
        return {"input_ids": {1: "S"}, **{name: {2: "P"} for name, _ in self.kv_pairs()}}

    def has_past(self) -> bool:
        """Whether a graph input has the past length ``P`` (a model with attention layers)."""
        return self.kv_layers != ()

    def output_names(self) -> list[str]:
        return ["outputs"] + [f"out_cache_{kind}_{i}" for kind, i in self.entries()]

    def kv_pairs(self) -> list[tuple[str, str]]:
        """(cache input, cache output) names of the keys and values, layer by layer."""
        return [(i, o) for i, o in zip(self.input_names()[1:], self.output_names()[1:])
                if i.startswith(("in_cache_key_", "in_cache_value_"))]

    def state_names(self) -> list[str]:
        """tract's names of the kept tensors of the stateful form (a windowed layer's
        keys and values are kept inside its attention; with every layer windowed, a
        count of the tokens seen is kept instead)."""
        from t2n.llm.kv_cache_forms import COUNTER
        from t2n.llm.stateful import STATE_PREFIX

        windowed = {layer for layer, _ in self.windows}
        names = [i.replace("in_cache", STATE_PREFIX, 1) for i, _ in self.kv_pairs()
                 if int(i.rsplit("_", 1)[1]) not in windowed]
        return names if names or not windowed else [COUNTER]

    def graph_input_names(self) -> list[str]:
        return ["input_ids"] if self.stateful else self.input_names()

    def graph_output_names(self) -> list[str]:
        return ["outputs"] if self.stateful else self.output_names()

    def empty_cache(self, past: int, batch: int = 1, *, random: bool = False) -> list[torch.Tensor]:
        """The cache tensors of ``past`` tokens (zeros: a prompt's empty cache and zero
        states; ``random``: example values for a trace)."""
        make = torch.randn if random else torch.zeros
        specs = {(s.kind, s.layer): s for s in self.states}
        out = []
        for kind, layer in self.entries():
            spec = specs.get((kind, layer))
            if spec is None:
                out.append(make((batch, self.kv_heads, past, self.head_dim), dtype=self.dtype))
            else:
                out.append(make((batch, *spec.shape), dtype=spec.dtype))
        return out


def cache_layout(model: torch.nn.Module) -> CacheLayout:
    """Read the cache layout off one real step of ``model`` (whatever names its config
    uses for heads and sizes, and whichever layers hold keys or recurrent states)."""
    import contextlib

    from t2n.frontend.meta_trace import stand_ins
    from t2n.llm.recurrent_state import StateMixers, recurrent_states

    parameter = next(model.parameters())
    # a hybrid model built on the meta device may hold real buffers (Falcon-H1's MuP
    # vector): its step runs on zero stand-ins of the weights, which cost no memory
    real = parameter.is_meta and StateMixers.find(model) is not None
    with torch.no_grad(), stand_ins(model) if real else contextlib.nullcontext():
        device = "cpu" if real else parameter.device
        out = model(input_ids=torch.zeros((1, 1), dtype=torch.long, device=device), use_cache=True)
    cache: Any = getattr(out, "past_key_values", None) or getattr(out, "cache_params", None)
    layers = cache.layers
    kv = [i for i, layer in enumerate(layers) if getattr(layer, "keys", None) is not None]
    states = recurrent_states(layers)
    if not kv:
        return CacheLayout(len(layers), 0, 0, parameter.dtype, kv_layers=(), states=states)
    keys = layers[kv[0]].keys
    return CacheLayout(len(layers), int(keys.shape[1]), int(keys.shape[3]), keys.dtype,
                       kv_layers=None if len(kv) == len(layers) else tuple(kv), states=states)


class KVCacheWrapper(torch.nn.Module):
    """``forward(input_ids, k_0, v_0, k_1, v_1, ...)`` → ``(logits, k_0', v_0', ...)``."""

    def __init__(self, model: torch.nn.Module, num_logits_to_keep: int | None = None,
                 layout: CacheLayout | None = None) -> None:
        from t2n.llm.recurrent_state import StateMixers

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
        out = self.model(input_ids=input_ids, past_key_values=cache, position_ids=positions,
                         use_cache=True, **extra)
        grown: list[torch.Tensor] = []
        for layer in out.past_key_values.layers:
            grown += [layer.keys, layer.values]
        return (out.logits, *grown)
