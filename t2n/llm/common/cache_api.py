"""How each ``transformers`` release takes and returns a model's cache, through its
public API: 5.24 and earlier name the argument ``past_key_values`` (``cache_params`` for
state-space models), 5.25 and later ``cache`` (the old names are renamed for a while,
but ``cache_params`` is dropped silently by the hybrid models, which then build a cache of
their own). The wrapper passes the cache under the name the model's ``forward`` declares
and reads it back from the output's field of that release."""

from __future__ import annotations

import inspect
from collections.abc import Mapping

import torch

CACHE_KEYWORDS = ("cache", "past_key_values", "cache_params")
"""The names ``forward`` has taken its cache under, newest first."""


def cache_keyword(model: torch.nn.Module) -> str:
    """The keyword ``model.forward`` takes its cache under."""
    accepts = inspect.signature(model.forward).parameters
    return next((name for name in CACHE_KEYWORDS if name in accepts), "past_key_values")


def returned_cache(output: object) -> object:
    """The cache a model's output holds (a ``ModelOutput``'s field; ``None`` when it
    returned none): a ``transformers`` cache of whichever class the model keeps."""
    if not isinstance(output, Mapping):  # a tuple output names no field
        return None
    return next((output[name] for name in CACHE_KEYWORDS if name in output), None)
