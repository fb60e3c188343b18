"""What ``t2n.llm`` does with each causal-LM family of ``transformers``: proven (its export
generates transformers' tokens) or refused, with the reason.

:data:`FAMILIES` covers every model type of ``MODEL_FOR_CAUSAL_LM_MAPPING`` in the pinned
transformers (a test checks it). A family is *proven* when a tiny random model of it,
exported and run in tract, generates the 16 tokens ``generate(do_sample=False)`` does:
in the tests (the note names them) or in the sweep of ``python -m tools.llm_families
sweep`` (its outcomes are in ``tools/llm_families_sweep.json``). Every other family is
*refused*: :func:`refusal` gives the reason, which ``export_llm`` raises as
:class:`~t2n.errors.UnsupportedArchitectureError` before anything is written. The
family table of ``docs/llm.md`` is written from this module by ``python -m
tools.llm_families doc``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import attrs

PROVEN = "proven"
REFUSED = "refused"


@attrs.frozen
class Family:
    """One causal-LM model type: ``status`` (:data:`PROVEN` or :data:`REFUSED`) and a
    note: how it is proven, or why it is refused and what to do."""

    model_type: str
    status: str = attrs.field(validator=attrs.validators.in_((PROVEN, REFUSED)))
    note: str


def _proven(model_type: str, note: str) -> Family:
    return Family(model_type, PROVEN, note)


def _refused(model_type: str, note: str) -> Family:
    return Family(model_type, REFUSED, note)


SWEEP = "sweep"
"""Note of a family proven by the sweep only."""

NOT_DECODER = ("not a decoder-only language model (an encoder used as a decoder, an "
               "encoder-decoder or a speech/vision model's decoder): export it with t2n.export")

_ROWS: tuple[Family, ...] = ()
"""Filled below, one row per model type (sorted)."""

FAMILIES: Mapping[str, Family] = MappingProxyType({f.model_type: f for f in _ROWS})


def family(model_type: str | None) -> Family | None:
    """The row of ``model_type`` (None for a type this table does not know)."""
    return FAMILIES.get(model_type or "")


def refusal(model_type: str | None) -> str | None:
    """Why ``t2n.llm`` refuses ``model_type`` (None when it does not)."""
    row = family(model_type)
    return row.note if row is not None and row.status == REFUSED else None


def proven_families() -> list[str]:
    """The model types proven to generate transformers' tokens."""
    return [f.model_type for f in FAMILIES.values() if f.status == PROVEN]


__all__ = ["FAMILIES", "Family", "family", "proven_families", "refusal"]
