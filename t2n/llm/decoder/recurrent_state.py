"""Hybrid language models (Qwen3-Next, Qwen3.5, OLMo-Hybrid, LFM2, Mamba, Falcon-H1, Jamba,
Bamba, Zamba...): besides the keys and values of their attention layers, each recurrent
layer keeps fixed-size states between calls, which the exported graph takes and returns
beside the KV cache:

- ``in_cache_conv_{i}`` / ``out_cache_conv_{i}``: the last ``kernel`` inputs of layer
  ``i``'s causal convolution, ``[B, channels, kernel]``;
- ``in_cache_recurrent_{i}`` / ``out_cache_recurrent_{i}``: its linear-attention or
  state-space state (``[B, heads, Dk, Dv]``, ``[B, channels, N]``, ``[B, heads, P, N]``), f32
  (none for LFM2's short convolutions, which keep a conv state only).

A prompt starts from zeros (what ``transformers`` computes without a cache), and each
call returns the states after its last token. The shapes and dtypes are read from the
cache ``transformers`` itself builds after one step (:func:`recurrent_states`).

While the wrapper runs the model, each recurrent mixer is replaced (in its parent, for
the call only) by one that computes any number of tokens from the states given
(:mod:`t2n.llm.decoder.recurrent_mixers`): the weights are the mixer's own tensors, so the
graph names them as the checkpoint does.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import torch

from t2n.errors import UnsupportedArchitectureError
from t2n.llm.common.cache_api import cache_keyword
from t2n.llm.common.layout import CacheLayout, StateSpec
from t2n.llm.decoder.recurrent_mixers import MIXERS, Mixer
from t2n.llm.decoder.text_rotary import text_rotary

if TYPE_CHECKING:
    from t2n.llm.common.stateful import LLMForms

STATE_KINDS = ("conv", "recurrent")

HYBRID_FAMILIES = ("Qwen3-Next", "Qwen3.5", "Qwen3.5-MoE", "OLMo-Hybrid", "LFM2", "LFM2-MoE", "LFM3",
                   "Mamba", "Mamba-2", "Falcon-Mamba", "Falcon-H1", "Jamba", "Bamba",
                   "Granite-MoE-Hybrid", "Nemotron-H", "Zamba", "Zamba-2")
"""Hybrid families proven to generate transformers' tokens (named in errors)."""


def recurrent_states(layers: Sequence[object]) -> tuple[StateSpec, ...]:
    """The conv and recurrent states of the linear-attention layers of a ``transformers``
    cache (``cache.layers`` after one step)."""
    out: list[StateSpec] = []
    for i, layer in enumerate(layers):
        for kind in STATE_KINDS:
            tensors = getattr(layer, f"{kind}_states", None)
            if not isinstance(tensors, dict):
                continue
            if len(tensors) != 1:
                raise UnsupportedArchitectureError(
                    f"layer {i} of the model keeps {len(tensors)} {kind} states; t2n.llm exports layers with "
                    f"one conv and one recurrent state ({', '.join(HYBRID_FAMILIES)})",
                    architecture=type(layer).__name__)
            state = tensors.get(0)
            if isinstance(state, torch.Tensor):
                out.append(StateSpec(kind, i, tuple(int(d) for d in state.shape[1:]), state.dtype))
    return tuple(out)


class _ExplicitStateMixer(torch.nn.Module):
    """Stands in for ``mixer`` during one wrapper call: the states come from, and go
    to, the call's ``io`` (keyed by (kind, layer)). ``mixer`` is not registered as a
    submodule: its parameters keep their place (and names) in the model."""

    _mixer: torch.nn.Module

    def __init__(self, mixer: torch.nn.Module, compute: Mixer, layer: int, io: dict[tuple[Any, ...], Any]) -> None:
        super().__init__()
        object.__setattr__(self, "_mixer", mixer)
        self.compute = compute
        self.layer = layer
        self.io = io

    def forward(self, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        out, conv, state = self.compute(self._mixer, hidden_states, self.io[("conv", self.layer)],
                                        self.io.get(("recurrent", self.layer)))  # None: a conv state only
        self.io[("out", "conv", self.layer)] = conv
        self.io[("out", "recurrent", self.layer)] = state
        return out


@attrs.define(eq=False)
class StateMixers:
    """The recurrent mixers of a model: (parent module, attribute, mixer, layer)."""

    places: list[tuple[torch.nn.Module, str, torch.nn.Module, int]]

    @classmethod
    def find(cls, model: torch.nn.Module) -> StateMixers | None:
        """The model's mixers of a known kind (:data:`MIXERS`), None when it has none."""
        places = []
        for parent in model.modules():
            for name, child in parent.named_children():
                if type(child).__name__ in MIXERS:
                    places.append((parent, name, child, int(child.layer_idx)))  # type: ignore[arg-type]
        return cls(places) if places else None

    @classmethod
    def for_layout(cls, model: torch.nn.Module, layout: CacheLayout) -> StateMixers:
        """The mixers that compute ``layout``'s states; a typed error naming the layer
        when one is not of a known kind."""
        found = cls.find(model) or cls([])
        layers = {layer for *_, layer in found.places}
        missing = sorted({s.layer for s in layout.states} - layers)
        if missing:
            kinds = sorted({type(m).__name__ for m in model.modules() if getattr(m, "layer_idx", None) in missing
                            and type(m).__name__ not in MIXERS and "Attention" not in type(m).__name__})
            name = kinds[0] if kinds else type(model).__name__
            raise UnsupportedArchitectureError(
                f"{type(model).__name__} keeps recurrent states in layer(s) {missing}, computed by {', '.join(kinds) or 'a mixer'} "
                f"that t2n.llm has no explicit-state form for (it has: {', '.join(sorted(MIXERS))}; proven to generate "
                f"the same tokens: {', '.join(HYBRID_FAMILIES)})", architecture=name)
        return found

    def forward(self, model: torch.nn.Module, layout: CacheLayout, input_ids: torch.Tensor,
                past: Sequence[torch.Tensor], num_logits_to_keep: int | None) -> tuple[torch.Tensor, ...]:
        """One call of ``model`` with the cache tensors ``past`` (in ``layout``'s order):
        (logits, the cache tensors after the call, in the same order)."""
        from transformers.cache_utils import Cache, DummyLayer, DynamicLayer

        entries = layout.entries()
        io: dict[tuple[Any, ...], Any] = dict(zip(entries, past))
        layers: list[Any] = []
        for i in range(layout.num_layers):
            if layout.has_kv(i):
                layer = DynamicLayer()  # type: ignore[no-untyped-call]
                layer.update(io[("key", i)], io[("value", i)])
                layers.append(layer)
            else:
                layers.append(DummyLayer())  # type: ignore[no-untyped-call]
        cache: Any = Cache(layers=layers)
        accepts = inspect.signature(model.forward).parameters
        kwargs: dict[str, Any] = {cache_keyword(model): cache, "use_cache": True}
        if layout.kv_layers != () and "position_ids" in accepts:
            past_length = io[next(e for e in entries if e[0] == "key")].shape[2]
            kwargs["position_ids"] = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0) + past_length
        if num_logits_to_keep is not None:
            kwargs["logits_to_keep"] = num_logits_to_keep
        stand_ins = [(parent, name, _ExplicitStateMixer(mixer, MIXERS[type(mixer).__name__], layer, io))
                     for parent, name, mixer, layer in self.places]
        try:
            for parent, name, stand_in in stand_ins:
                parent._modules[name] = stand_in
            with text_rotary(model):
                out = model(input_ids=input_ids, **kwargs)
        finally:
            for (parent, name, mixer, _), _s in zip(self.places, stand_ins):
                parent._modules[name] = mixer
        grown: list[torch.Tensor] = []
        for kind, i in entries:
            if kind == "key":
                grown.append(cache.layers[i].keys)
            elif kind == "value":
                grown.append(cache.layers[i].values)
            else:
                grown.append(io[("out", kind, i)])
        return (out.logits, *grown)


def _dtype_name(dtype: torch.dtype) -> str:
    return "float16" if dtype == torch.bfloat16 else str(dtype).removeprefix("torch.")


def describe_states(layout: CacheLayout) -> dict[str, object]:
    """What ``modes.json`` says of a hybrid model's cache: which layers hold keys and
    values, and each cache input's shape and dtype for a prompt (``P == 0``; states are
    zeros then). Empty for a model without recurrent states."""
    if not layout.states:
        return {}
    specs = {(s.kind, s.layer): s for s in layout.states}
    empty: dict[str, object] = {}
    for name, entry, dtype in zip(layout.input_names()[1:], layout.entries(), layout.dtypes()):
        spec = specs.get(entry)
        dim = layout.value_dim if entry[0] == "value" else layout.head_dim
        shape = [1, *spec.shape] if spec is not None else [1, layout.kv_heads, 0, dim]
        empty[name] = {"shape": shape, "dtype": _dtype_name(dtype)}
    kv_layers = [i for i in range(layout.num_layers) if layout.has_kv(i)]
    return {"kv_layers": kv_layers,
            "recurrent_states": [{"input": f"in_cache_{s.kind}_{s.layer}", "output": f"out_cache_{s.kind}_{s.layer}",
                                  "kind": s.kind, "layer": s.layer} for s in layout.states],
            "empty": empty}


def check_hybrid_forms(layout: CacheLayout, forms: LLMForms) -> None:
    """Refuse tract's stateful cache for a model with recurrent states: tract keeps
    state between runs only for caches that grow (``tract_transformers_dyn_kv_cache``
    appends), and these states are replaced at each token."""
    from t2n.errors import NotExpressibleError, OpProblem

    if layout.states and forms.stateful:
        names = ", ".join(f"in_cache_{s.kind}_{s.layer}" for s in layout.states[:4])
        raise NotExpressibleError([OpProblem("stateful cache", "", "", (
            f"the model keeps fixed-size recurrent states ({names}...) that each call replaces; tract keeps "
            "only growing caches in its state (tract_transformers_dyn_kv_cache appends): export with "
            "kv_cache='explicit'"))], "tract (stateful cache)")
