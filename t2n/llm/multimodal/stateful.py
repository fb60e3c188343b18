"""A multimodal decoder with tract's stateful KV cache (``kv_cache="stateful"``,
``"stateful_int8"``, ``"stateful_int4"``): the explicit-cache decoder rewritten by
:class:`~t2n.llm.stateful.StatefulKVCache`, so that it takes ``input_ids`` and the
encoder's outputs (the embedding rows of this call's placeholder tokens) and returns
the logits, tract keeping the keys and values in its state (the rewrite is
:func:`~t2n.llm.stateful.make_stateful`'s and the check of the samples' steps
:func:`~t2n.llm.stateful.verify_stateful`'s; here: the refusal).

The Qwens are refused: their 3-D rotary shift (``rope_delta``) is fed back from call to
call, and tract keeps as state only a cache that each call appends to."""

from __future__ import annotations

from typing import Any

from t2n.errors import InvalidArgumentError
from t2n.llm.multimodal.families import Family


def check_stateful(model: Any, family: Family, kv_cache: str) -> None:
    """``InvalidArgumentError`` for a stateful ``kv_cache`` of a family that feeds a
    value back that is not a cache (the Qwens' rotary shift)."""
    if kv_cache != "explicit" and family.grid is not None:
        raise InvalidArgumentError(
            f"kv_cache={kv_cache!r}: {type(model).__name__}'s decoder feeds back its 3-D rotary shift "
            "(rope_delta, the positions the images so far took) from call to call, and tract keeps as state "
            "only a cache each call appends to; export it with kv_cache='explicit'")
