"""tract's stateful KV cache: the graph keeps the keys and values of past tokens itself
(``tract_transformers_dyn_kv_cache``, tract 0.23+) instead of taking them as inputs and
returning them, so a runtime feeds only ``input_ids`` and keeps one tract state per
conversation.

:class:`StatefulKVCache` rewrites the explicit form the wrapper traces: each cache input
``in_cache_{kind}_{i}``, read only by ``concat([in, new], axis)`` whose result is the
output ``out_cache_{kind}_{i}``, becomes ``kv_cache_append(new)``; the input and output
leave the graph. tract binds the past length ``P`` to the length of the state it keeps
(0 before the first run), so positions and masks computed from ``P`` stay right.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from t2n.errors import InvalidArgumentError, NotExpressibleError, OpProblem
from t2n.ir import Graph, Op, Value
from t2n.passes.base import Pass, PassResult
from t2n.passes.rewrite import Pattern, PatternPass, Patterns, Rewritten, apply_patterns

DYN_KV_CACHE = "tract_transformers_dyn_kv_cache"
QUANTIZED_KV_CACHE = "tract_transformers_quantized_dyn_kv_cache"
WINDOW_KV_SDPA = "tract_transformers_window_kv_sdpa"

KV_CACHES = {"explicit": None, "stateful": 0, "stateful_int8": 8, "stateful_int4": 4}
"""``kv_cache=`` values → None (explicit inputs/outputs) or the stateful cache's bits
per stored value (0: the model's dtype; 8, 4: tract's quantized cache)."""

STATE_PREFIX = "cache"
"""tract's name of each kept tensor: ``cache_key_0``, ``cache_value_0``, ..."""


def _cache_concat(graph: Graph, past: Value, out_name: str) -> tuple[Value, int] | None:
    """(new, axis) when ``past`` is read only by ``concat([past, new])`` that is the
    graph output ``out_name``."""
    users = graph.users(past)
    if len(users) != 1 or users[0].kind != "concat" or len(users[0].inputs) != 2:
        return None
    cat = users[0]
    if cat.inputs[0] is not past or not graph.is_output(cat.output):
        return None
    if [v.name for v in graph.outputs if v is cat.output] != [out_name]:
        return None
    return cat.inputs[1], int(cat.attrs["axis"]) % past.rank


def _drop_output(graph: Graph, out: Value) -> None:
    """``out`` leaves the graph's outputs, and its name the names the artifact reports
    (the graph's values are named apart from them: the renderer reads these)."""
    info = graph.info
    if info.output_names is not None:
        j = next(k for k, v in enumerate(graph.outputs) if v is out)
        info.output_names = info.output_names[:j] + info.output_names[j + 1:]
    graph.set_outputs([v for v in graph.outputs if v is not out])


def _drop_input(graph: Graph, past: Value) -> None:
    """``past``, read no more, leaves the graph's inputs and the names reported."""
    info = graph.info
    if info.input_names is not None:
        i = next(k for k, v in enumerate(graph.inputs) if v is past)
        info.input_names = info.input_names[:i] + info.input_names[i + 1:]
    graph.remove_input(past)


def _pairs(pairs: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple((str(a), str(b)) for a, b in pairs)


@attrs.frozen
class StatefulKVCache(PatternPass):
    """Explicit cache inputs/outputs (``pairs``: input name → output name) → tract's
    stateful cache over symbol ``past``."""

    pairs: tuple[tuple[str, str], ...] = attrs.field(converter=_pairs)
    past: str = "P"
    bits: int = 0
    """8 or 4: tract's quantized cache (keys per channel, values per token); 0: as computed."""

    name = "stateful-kv-cache"
    interface = True  # after the target's forms (the attention reads the cache it appends to)

    def patterns(self) -> Patterns:
        return [Pattern("kv caches", self._match, self._append)]

    def _match(self, graph: Graph, cat: Op) -> tuple[Value, Value, int] | None:
        """(the cache input, the new rows, the axis) of a concat that appends to a cache."""
        if cat.kind != "concat" or len(cat.inputs) != 2 or cat.inputs[0] not in graph.inputs:
            return None
        past = cat.inputs[0]
        out_name = dict(self.pairs).get(past.name)
        found = _cache_concat(graph, past, out_name) if out_name is not None else None
        return None if found is None else (past, *found)

    def _append(self, graph: Graph, cat: Op, found: tuple[Value, Value, int]) -> Rewritten:
        """``kv_cache_append(new)`` in place of the concat; its output leaves the graph."""
        past, new, axis = found
        state = past.name.replace("in_cache", STATE_PREFIX, 1)
        attrs_: dict[str, Any] = {"name": state, "axis": axis, "past": self.past}
        if self.bits:
            attrs_.update(bits=self.bits, per_channel="_key_" in past.name)
        grown = graph.create_op("kv_cache_append", [new], attrs_, loc=cat.loc, names=[state]).output
        _drop_output(graph, cat.output)
        return Rewritten({cat.output: grown}, renamed=False)

    def run(self, graph: Graph) -> PassResult:
        """Refuse before any edit when a pair is not a cache append; then each concat on
        the driver, and the cache inputs leave the graph."""
        inputs = {v.name: v for v in graph.inputs}
        problems = [OpProblem("stateful KV cache", "", "", (
            f"the cache input '{in_name}' is not appended to as one concat that is the output "
            f"'{out_name}'; export with kv_cache='explicit'"))
            for in_name, out_name in self.pairs
            if in_name not in inputs or _cache_concat(graph, inputs[in_name], out_name) is None]
        if problems:
            raise NotExpressibleError(problems, "tract (stateful KV cache)")
        counts = apply_patterns(graph, self.patterns())
        for in_name, _ in self.pairs:
            _drop_input(graph, inputs[in_name])
        return PassResult(graph, bool(self.pairs), dict(counts))


def run_steps(path: str, calls: Sequence[Sequence[np.ndarray]], *, one_token: bool = False) -> list[np.ndarray]:
    """The logits tract gives for each call's inputs (in the graph's order: ``input_ids``,
    then a multimodal decoder's encoder rows), the calls run one after the other in one
    state (the first with an empty cache). ``one_token``: each call's tokens (its only
    input) are fed one call each (a graph with tract's window cache), the logits of the
    calls put side by side."""
    import tract

    from t2n.backends.tract.child import numpy_of
    from t2n.llm.common.generate import load_runnable

    state = load_runnable(path).spawn_state()

    def run(inputs: Sequence[np.ndarray]) -> np.ndarray:
        return np.asarray(numpy_of(tract, np, state.run([np.asarray(x) for x in inputs])[0]))

    if not one_token:
        return [run(inputs) for inputs in calls]
    return [np.concatenate([run([ids[:, i:i + 1]]) for i in range(ids.shape[1])], axis=1) for ids, in calls]


@attrs.frozen
class LLMForms:
    """Which of tract's own forms an LLM export writes: the stateful cache (quantized to
    ``kv_bits`` per value, sliding-window layers keeping only their ``window``), and the
    rotary embedding and RMS normalization as one op each."""

    stateful: bool = False
    reify_rope: bool = False
    reify_rms_norm: bool = False
    kv_bits: int = 0
    window: bool = False

    @classmethod
    def of(cls, kv_cache: str, reify_rope: bool = False, reify_rms_norm: bool = False,
           window_kv_cache: bool = False) -> LLMForms:
        bits = KV_CACHES[kv_cache]
        return cls(bits is not None, reify_rope, reify_rms_norm, bits or 0, window_kv_cache)

    def passes(self) -> list[Pass]:
        from t2n.llm.common.attention_rows import DropEmptyRowGuards
        from t2n.llm.common.last_rows import SliceRowsEarly
        from t2n.passes.reify_transformers import ReifyRmsNorm, ReifyRope

        out: list[Pass] = [DropEmptyRowGuards(), SliceRowsEarly()]
        if self.reify_rope:
            out.append(ReifyRope())
        if self.reify_rms_norm:
            out.append(ReifyRmsNorm())
        return out


def check_llm_forms(kv_cache: object, tract_version: str | None, *, reify_rope: object = False,
                    reify_rms_norm: object = False, window_kv_cache: object = False) -> None:
    """Refuse a bad ``kv_cache`` or flag (``InvalidArgumentError``), and a stateful cache
    for a tract that cannot load it (``NotExpressibleError`` naming the version needed),
    before anything is written."""
    from t2n.backends.tract.target import TractNNEF
    from t2n.backends.tract.versions import min_tract_version

    if kv_cache not in KV_CACHES:
        raise InvalidArgumentError(f"kv_cache must be one of {', '.join(map(repr, KV_CACHES))}, got {kv_cache!r}")
    flags = {"reify_rope": reify_rope, "reify_rms_norm": reify_rms_norm, "window_kv_cache": window_kv_cache}
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise InvalidArgumentError(f"{name} must be True or False, got {value!r}")
    if flags.get("window_kv_cache") and kv_cache == "explicit":
        raise InvalidArgumentError("window_kv_cache=True keeps each sliding-window layer's keys and values in "
                                   "tract's state: use it with a stateful kv_cache ('stateful', "
                                   "'stateful_int8', 'stateful_int4')")
    target = TractNNEF(tract_version) if tract_version else TractNNEF()
    needs = [(DYN_KV_CACHE, f"kv_cache={kv_cache!r}", "kv_cache='explicit'")] if KV_CACHES[kv_cache] is not None else []
    if KV_CACHES[kv_cache]:
        needs.append((QUANTIZED_KV_CACHE, f"kv_cache={kv_cache!r}", "kv_cache='stateful'"))
    if flags.get("window_kv_cache"):
        needs.append((WINDOW_KV_SDPA, "window_kv_cache=True", "window_kv_cache=False"))
    for op, option, instead in needs:
        needed = min_tract_version(op) or "0.23.0"
        if not target.at_least(needed):
            raise NotExpressibleError([OpProblem("stateful KV cache", "", "", (
                f"{option} needs tract's {op}, which tract {target.version} does not have (it is in tract "
                f"{needed} and newer); export with tract_version='{needed}' or newer, or with {instead}"))],
                f"tract {target.version}")


def stateful_passes(pairs: Sequence[tuple[str, str]], bits: int = 0, windows: dict[int, int] | None = None
                    ) -> list[Pass]:
    """The interface passes that give the traced explicit-cache graph tract's stateful
    cache (quantized to ``bits`` per value): :class:`StatefulKVCache`, then for the layers
    of ``windows`` (layer → window) tract's sliding-window cache and attention
    (:mod:`t2n.llm.common.kv_cache_forms`). They run last in the compile's pipeline, so the
    artifact is rendered, named and written once, as every other."""
    passes: list[Pass] = [StatefulKVCache(pairs, bits=bits)]
    if windows:
        from t2n.llm.common.kv_cache_forms import WindowKvAttention

        passes.append(WindowKvAttention(windows))
    return passes
