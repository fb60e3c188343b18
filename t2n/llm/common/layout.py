"""The layout of an LLM's cache: which tensors the graph takes and returns beside the
tokens (the keys and values of the attention layers; the fixed-size states of a hybrid
model's recurrent layers), in which order, shape and dtype."""

from __future__ import annotations

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
    each ``[B, kv_heads, P, head_dim]`` (the values' last size may differ:
    ``value_head_dim``), in ``dtype``; ``kv_layers`` names those layers
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
    value_head_dim: int | None = None
    """The values' last size when it differs from the keys' (DeepSeek's latent cache
    keeps the compressed keys/values in the key slot and the rotary keys in the value
    slot)."""

    @property
    def value_dim(self) -> int:
        return self.head_dim if self.value_head_dim is None else self.value_head_dim

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
        from t2n.llm.common.kv_cache_forms import COUNTER
        from t2n.llm.common.stateful import STATE_PREFIX

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
                dim = self.value_dim if kind == "value" else self.head_dim
                out.append(make((batch, self.kv_heads, past, dim), dtype=self.dtype))
            else:
                out.append(make((batch, *spec.shape), dtype=spec.dtype))
        return out
