"""tract's sliding-window cache (``window_kv_cache=True``): the layers of a model that
attend within a sliding window keep only the last ``window`` tokens' keys and values, in
a ring buffer tract holds (``tract_transformers_window_kv_sdpa``), so their memory and
per-token cost stop growing with the conversation.

:class:`WindowKvAttention` rewrites the stateful graph (after
:class:`~t2n.llm.common.stateful.StatefulKVCache` and the attention reified as ``tract_sdpa``):
an attention of a windowed layer whose keys and values come, through the repeat of
grouped-query attention, from that layer's ``kv_cache_append`` ops becomes one
``window_kv_sdpa`` of the new keys and values; the attention mask, which the window now
enforces, is no longer read. The ring buffer lets every query see every kept key, so a
call takes one token (``S == 1``): a runtime feeds a prompt one token at a time.

Positions still follow ``P``, the count of tokens seen, which tract binds to the length
of a cache it keeps. When every layer is windowed no such cache is left, so the pass
keeps a count: a cache of one f16 per token (2 bytes per token, beside a KV cache of
``2 · layers · kv_heads · head_dim`` values per token) whose last value, non-negative,
adds ``min(last, 0) == 0`` to the logits so that tract runs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs

from t2n.errors import InvalidArgumentError
from t2n.ir import Builder, DType, Graph, Op, Value
from t2n.ir.dims import Sym
from t2n.passes.base import PassResult
from t2n.passes.rewrite import Pattern, PatternPass, Patterns, Rewritten, apply_patterns

if TYPE_CHECKING:
    from transformers import PretrainedConfig

_GQA_STEPS = frozenset({"unsqueeze", "expand", "reshape", "tile"})
"""Ops between a kept cache and the attention (the repeat of grouped-query attention)."""

COUNTER = "cache_position"
"""tract's name of the token count kept when every layer is windowed."""


def sliding_windows(config: PretrainedConfig) -> dict[int, int]:
    """Layer → window of the layers that attend within a sliding window (a token sees
    itself and the ``window - 1`` before it), as ``transformers`` builds their masks:
    the ``sliding_attention`` entries of ``layer_types``, or every layer of a model with
    a ``sliding_window`` and no ``layer_types`` (Mistral)."""
    window = getattr(config, "sliding_window", None)
    if not isinstance(window, int) or isinstance(window, bool) or window <= 0:
        return {}
    types = getattr(config, "layer_types", None)
    if types is not None:
        return {i: window for i, kind in enumerate(types) if kind == "sliding_attention"}
    if getattr(config, "use_sliding_window", True) is False:
        return {}
    return {i: window for i in range(int(config.num_hidden_layers))}


def check_windows(config: PretrainedConfig) -> dict[int, int]:
    """The model's windows; ``InvalidArgumentError`` when it has none."""
    windows = sliding_windows(config)
    if not windows:
        raise InvalidArgumentError(
            f"window_kv_cache=True: the model ({getattr(config, 'model_type', '?')}) has no sliding-window "
            "attention layer (config.sliding_window / layer_types); export without window_kv_cache")
    return windows


def _windows(value: Mapping[int, int]) -> dict[int, int]:
    return {int(k): int(v) for k, v in value.items()}


def _cache_behind(graph: Graph, v: Value, reader: Op) -> tuple[Op, list[Op]] | None:
    """(the ``kv_cache_append`` that makes ``v`` through the repeat of grouped-query
    attention, the ops in between) when each value on the way is read only by the next op."""
    chain: list[Op] = []
    while True:
        if graph.is_output(v) or [u for u, _ in v.uses] != [reader]:
            return None
        op = v.producer
        if op is None:
            return None
        if op.kind == "kv_cache_append":
            return op, chain
        if op.kind not in _GQA_STEPS:
            return None
        chain.append(op)
        v, reader = op.inputs[0], op


def _layer(cache: Op) -> int | None:
    name = str(cache.attrs.get("name", ""))
    tail = name.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else None


@attrs.frozen
class _Windowed:
    """An attention of a windowed layer: its key and value caches and its window."""

    key: Op
    value: Op
    window: int


@attrs.frozen
class WindowKvAttention(PatternPass):
    """The attention of each layer of ``windows`` (layer → window) as tract's
    sliding-window cache and attention."""

    windows: Mapping[int, int] = attrs.field(converter=_windows)
    past: str = "P"

    name = "window-kv-attention"
    interface = True  # after the stateful cache it reads

    def patterns(self) -> Patterns:
        return [Pattern("windowed attentions", self._match, _windowed_attention)]

    def _match(self, graph: Graph, sdpa: Op) -> _Windowed | None:
        if sdpa.kind != "tract_sdpa":
            return None
        found = [_cache_behind(graph, sdpa.inputs[i], sdpa) for i in (1, 2)]
        if found[0] is None or found[1] is None:
            return None
        (key, _), (value, _) = found[0], found[1]
        layer = _layer(key)
        if layer is None or layer != _layer(value) or layer not in self.windows:
            return None
        return _Windowed(key, value, self.windows[layer])

    def run(self, graph: Graph) -> PassResult:
        counts = apply_patterns(graph, self.patterns())
        if counts and not any(op.kind == "kv_cache_append" for op in graph.ops()):
            self._keep_count(graph)
        return PassResult(graph, bool(counts), dict(counts))

    def _keep_count(self, graph: Graph) -> None:
        """A kept cache of the token ids (f16), so that tract binds ``P``; its last
        value, ``min``-ed with 0, is added to the logits (the first output)."""
        b = Builder(graph)
        ids = next(v for v in graph.inputs if v.name == "input_ids")
        logits = graph.outputs[0]
        tokens = b.op("cast", ids, to=DType.F16, name="position_ids_f16")
        kept = graph.create_op("kv_cache_append", [tokens], {"name": COUNTER, "axis": 1, "past": self.past},
                               names=[COUNTER]).output
        end = Sym(self.past) + ids.type.shape[1]
        last = b.op("slice", kept, b.ints([end - 1]), b.ints([end]), axes=(1,), steps=(1,), name="last_position")
        zero = b.cast(b.op("min", last, b.const(0.0, DType.F16), name="position_zero"), logits.type.dtype)
        counted = b.op("add", logits, zero, name="outputs_counted")
        graph.set_outputs([counted, *graph.outputs[1:]])
        graph.rename(logits, "logits_uncounted")
        graph.rename(counted, "outputs")


def _windowed_attention(graph: Graph, sdpa: Op, found: _Windowed) -> Rewritten:
    """One ``window_kv_sdpa`` of the new keys and values in place of the attention (and
    of the select that zeroed its empty rows); the two caches it kept go."""
    key, value = found.key, found.value
    attention = graph.create_op(
        "window_kv_sdpa", [sdpa.inputs[0], key.inputs[0], value.inputs[0]],
        {"axis": int(key.attrs["axis"]), "window": found.window, "scale": float(sdpa.attrs["scale"])},
        loc=sdpa.loc, names=[f"window_attention_{_layer(key)}"]).output
    replaced = _masked_rows_select(graph, sdpa.output) or sdpa.output
    return Rewritten({replaced: attention}, erased=(key, value), renamed=False)


def _masked_rows_select(graph: Graph, out: Value) -> Value | None:
    """The ``select(any(mask), out, 0)`` that zeroes the rows whose every key is masked
    (kept by the sdpa pass, as PyTorch does): a window always holds the token itself,
    so no row is empty and the select goes with the mask."""
    users = [u for u, _ in out.uses]
    if len(users) != 1 or graph.is_output(out):
        return None
    select = users[0]
    if select.kind != "select" or select.inputs[1] is not out:
        return None
    cond = select.inputs[0].producer
    return select.output if cond is not None and cond.kind == "any_reduce" else None
