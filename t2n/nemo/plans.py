"""The default remodel plans of a NeMo recognizer's artifacts: one utterance at a time.

For each sub-network: the batch axis (``B``, a symbol at export) is collapsed, which
fixes it to 1 inside; each length input is bound to the size of the axis it measures
(an application that gives one whole utterance never passes a length); the lengths
outputs, which then equal an axis size too, are dropped. A plan for several
sub-networks (``{"encoder": {...}, ...}``) is written in the widely used exporter's
shape-config format, so it can be edited and given back (``plan=`` / ``--plan``).
"""

from __future__ import annotations

from typing import Any

from t2n.nemo.model import ModelFacts
from t2n.nemo.subnets import BATCH, ENCODED, FRAMES, LABELS, SAMPLES


def default_plans(facts: ModelFacts, names: list[str], max_frames: int | None = None) -> dict[str, Any]:
    """The plan of every sub-network in ``names``, as a mapping (see the module)."""
    batch = {"collapse_dims": [BATCH]}
    plans: dict[str, Any] = {
        "preprocessor": {
            "inputs": {
                "input_signal": {"original_shape": [BATCH, SAMPLES], **batch},
                "length": {"original_shape": [BATCH], "collapse_dims": [0],
                           "bind_scalar_to_dim_size": f"input_signal.{SAMPLES}"},
            },
            "outputs": {"processed_signal": {"collapse_dims": [0]}},
            "outputs_keep": ["processed_signal"],
        },
        "encoder": {
            "inputs": {
                "audio_signal": {"original_shape": [BATCH, facts.features, FRAMES], **batch},
                "length": {"original_shape": [BATCH], "collapse_dims": [0],
                           "bind_scalar_to_dim_size": f"audio_signal.{FRAMES}"},
            },
            "outputs": {"outputs": {"collapse_dims": [0]}},
            "outputs_keep": ["outputs"],
            **({"extensions": [f"tract_assert {FRAMES} <= {max_frames}"]} if max_frames else {}),
        },
        "ctc_decoder": {
            "inputs": {"encoder_output": {"original_shape": [BATCH, facts.d_model, ENCODED], **batch}},
            "outputs": {"logprobs": {"collapse_dims": [0]}},
        },
        "decoder": {
            "inputs": {
                "targets": {"original_shape": [BATCH, LABELS], **batch},
                "target_length": {"original_shape": [BATCH], "collapse_dims": [0],
                                  "bind_scalar_to_dim_size": f"targets.{LABELS}"},
                "input_states_1": {"original_shape": [facts.pred_layers, BATCH, facts.pred_hidden], **batch},
                "input_states_2": {"original_shape": [facts.pred_layers, BATCH, facts.pred_hidden], **batch},
            },
            "outputs": {"outputs": {"collapse_dims": [0]}, "output_states_1": {"collapse_dims": [1]},
                        "output_states_2": {"collapse_dims": [1]}},
            "outputs_keep": ["outputs", "output_states_1", "output_states_2"],
        },
        "joint": {
            "inputs": {
                "encoder_outputs": {"original_shape": [BATCH, facts.d_model, ENCODED], **batch},
                "decoder_outputs": {"original_shape": [BATCH, facts.pred_hidden, LABELS], **batch},
            },
            "outputs": {"outputs": {"collapse_dims": [0]}},
        },
    }
    return {name: plans[name] for name in names}


def batched_plans(facts: ModelFacts, names: list[str]) -> dict[str, Any]:
    """Plans that keep NeMo's batched interface, only naming its dynamic axes
    (``remodel=False``): what the artifacts are before the default plans."""
    out: dict[str, Any] = {}
    for name, plan in default_plans(facts, names).items():
        out[name] = {"inputs": {i: {"original_shape": p["original_shape"]} for i, p in plan["inputs"].items()}}
    return out
