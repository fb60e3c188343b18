"""What an LLM decoder's artifact tells a runtime about its calls: the named modes
(``tract_assert`` lines, the symbols' bounds) and ``modes.json``, shared by the text and
multimodal exports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from t2n.llm.common.layout import CacheLayout
from t2n.llm.decoder.recurrent_state import describe_states

if TYPE_CHECKING:
    import transformers

MODES = {
    "pp": {"assert": "P == 0", "description": "prompt processing: the whole prompt, empty cache"},
    "tg": {"assert": "S == 1", "description": "token generation: one new token after P cached ones"},
}
"""The named modes written as ``tract_assert NAME: ...`` lines and in ``modes.json``."""


def max_positions(config: transformers.PretrainedConfig) -> int | None:
    """How many positions the model embeds (``S + P`` must stay below it)."""
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


MODES_WITHOUT_PAST = {
    "pp": {"assert": "S >= 2", "description": "prompt processing: several tokens at once (a prompt starts "
                                              "from zero states)"},
    "tg": MODES["tg"],
}
"""The modes of a model without attention layers (no ``P``: a prompt is a call with zero
states, not a shape). tract needs both: with ``tg`` alone it specialises every call to
``S == 1``."""


def modes(has_past: bool = True) -> dict[str, dict[str, str]]:
    """The named modes a graph asserts."""
    return MODES if has_past else MODES_WITHOUT_PAST


def extension_lines(config: transformers.PretrainedConfig, has_past: bool = True) -> list[str]:
    """The ``tract_assert`` lines: bounds of ``S`` and ``P`` and the named modes."""
    lines = (["tract_assert P >= 0"] if has_past else []) + ["tract_assert S >= 1"]
    limit = max_positions(config)
    if limit is not None and has_past:
        lines.append(f"tract_assert S + P < {limit}")
    lines += [f"tract_assert {name}: {mode['assert']}" for name, mode in modes(has_past).items()]
    return lines


def _written_dtype(dtype: torch.dtype) -> str:
    return "float16" if dtype == torch.bfloat16 else str(dtype).removeprefix("torch.")


def write_modes(layout: CacheLayout, config: transformers.PretrainedConfig, out: Path, *, samples: bool = True
                ) -> None:
    """``modes.json``: the symbols, the named modes and the cache layout a runtime needs."""
    description = {
        "format": "t2n-llm/1",
        "model": "model/model.nnef.tgz",
        "symbols": {"S": "tokens given in this call", "P": "tokens already in the cache"},
        "max_positions": max_positions(config),
        "modes": modes(layout.has_past()),
        "inputs": layout.graph_input_names(),
        "outputs": layout.graph_output_names(),
        "cache": {"form": "stateful" if layout.stateful else "explicit",
                  "num_layers": layout.num_layers, "kv_heads": layout.kv_heads,
                  "head_dim": layout.head_dim, "dtype": _written_dtype(layout.dtype),
                  **({"value_head_dim": layout.value_dim} if layout.value_head_dim is not None else {}),
                  "shape": "[B, kv_heads, P, head_dim] in, [B, kv_heads, P + S, head_dim] out",
                  **({"states": layout.state_names()} if layout.stateful else {}),
                  **({"quantized_bits": layout.kv_bits} if layout.kv_bits else {}),
                  **({"windows": {str(i): w for i, w in layout.windows}, "tokens_per_call": 1}
                     if layout.windows else {}),
                  **describe_states(layout)},
        "state_inputs": state_inputs(layout),
        "tests": [] if not samples else
                 ["tests/prefill.npz", "tests/decode.npz", *([] if layout.stateful else ["tests/io.npz"])],
    }
    (out / "modes.json").write_text(json.dumps(description, indent=2) + "\n")


def state_inputs(layout: CacheLayout) -> list[dict[str, object]]:
    """Each input a runtime carries from call to call, as data: its name, the output that
    feeds it in the next call, and its value for a new sequence (shape, dtype, fill), so a
    driver needs no rule of its own (empty for tract's stateful cache: the state keeps it)."""
    if layout.stateful:
        return []
    starts = layout.empty_cache(0)
    return [{"input": i, "fed_by": o, "start": {"shape": list(t.shape), "dtype": _written_dtype(t.dtype), "fill": 0}}
            for (i, o), t in zip(layout.kv_pairs(), starts)]
