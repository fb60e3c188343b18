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
    plans: dict[str, Any] = {
        "preprocessor": preprocessor_plan(),
        "encoder": encoder_plan(facts.features, max_frames),
        "ctc_decoder": {
            "inputs": {"encoder_output": batched([BATCH, facts.d_model, ENCODED])},
            "outputs": {"logprobs": {"collapse_dims": [0]}},
        },
        "decoder": _decoder_plan(facts),
        "joint": {
            "inputs": {
                "encoder_outputs": batched([BATCH, facts.d_model, ENCODED]),
                "decoder_outputs": batched([BATCH, facts.pred_hidden, LABELS]),
            },
            "outputs": {"outputs": {"collapse_dims": [0]}},
        },
    }
    return {name: plans[name] for name in names}


def batched(shape: list[Any]) -> dict[str, Any]:
    """An input of ``shape`` whose batch axis is collapsed (fixed to 1), found by its name."""
    return {"original_shape": shape, "collapse_dims": [BATCH]}


def _length(measures: str) -> dict[str, Any]:
    """A ``[B]`` lengths input, bound to the size of the axis ``measures`` names
    (``input.axis``), so one whole utterance needs no lengths passed."""
    return {"original_shape": [BATCH], "collapse_dims": [0], "bind_scalar_to_dim_size": measures}


def preprocessor_plan() -> dict[str, Any]:
    """Audio samples in, features out; the lengths follow the samples."""
    return {
        "inputs": {
            "input_signal": batched([BATCH, SAMPLES]),
            "length": _length(f"input_signal.{SAMPLES}"),
        },
        "outputs": {"processed_signal": {"collapse_dims": [0]}},
        "outputs_keep": ["processed_signal"],
    }


def encoder_plan(features: int, max_frames: int | None) -> dict[str, Any]:
    """Features in, encoded frames out; ``max_frames`` bounds the frames for the engine."""
    return {
        "inputs": {
            "audio_signal": batched([BATCH, features, FRAMES]),
            "length": _length(f"audio_signal.{FRAMES}"),
        },
        "outputs": {"outputs": {"collapse_dims": [0]}},
        "outputs_keep": ["outputs"],
        **({"extensions": [f"tract_assert {FRAMES} <= {max_frames}"]} if max_frames else {}),
    }


def _decoder_plan(facts: ModelFacts) -> dict[str, Any]:
    """The prediction network: labels and its two recurrent states (batch on axis 1) in and out."""
    return {
        "inputs": {
            "targets": batched([BATCH, LABELS]),
            "target_length": _length(f"targets.{LABELS}"),
            "input_states_1": batched([facts.pred_layers, BATCH, facts.pred_hidden]),
            "input_states_2": batched([facts.pred_layers, BATCH, facts.pred_hidden]),
        },
        "outputs": {"outputs": {"collapse_dims": [0]}, "output_states_1": {"collapse_dims": [1]},
                    "output_states_2": {"collapse_dims": [1]}},
        "outputs_keep": ["outputs", "output_states_1", "output_states_2"],
    }


def batched_plans(facts: ModelFacts, names: list[str]) -> dict[str, Any]:
    """Plans that keep NeMo's batched interface, only naming its dynamic axes
    (``remodel=False``): what the artifacts are before the default plans."""
    out: dict[str, Any] = {}
    for name, plan in default_plans(facts, names).items():
        out[name] = {"inputs": {i: {"original_shape": p["original_shape"]} for i, p in plan["inputs"].items()}}
    return out
