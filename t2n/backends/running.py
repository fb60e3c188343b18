"""Running an artifact with its target's ``run``, whoever wrote that target: whatever
goes wrong comes back as an :class:`~t2n.errors.EngineError` naming the target, and
what ``run`` returns is checked to be one array per output."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from t2n.backends.target import Target
from t2n.errors import EngineError, T2NError


def run_on_target(target: Target, path: Path, inputs: Sequence[np.ndarray], *,
                  registries: Sequence[str] = (), symbols: Mapping[str, int] | None = None) -> list[np.ndarray]:
    """``target.run(path, inputs, ...)``, its failures typed and its result checked."""
    try:
        outputs = target.run(path, inputs, registries=registries, symbols=symbols)
    except T2NError:
        raise
    except Exception as exc:  # a user target's engine may raise anything: typed, with its cause
        raise EngineError(
            f"{type(target).__name__}.run ({target.engine}) failed on {path}: "
            f"{type(exc).__name__}: {exc}\nWhat to do: if this target is your own, fix its "
            "run() (its exception is chained below); else the engine refused the artifact."
        ) from exc
    if isinstance(outputs, (str, bytes, np.ndarray)) or not isinstance(outputs, Sequence):
        raise EngineError(
            f"{type(target).__name__}.run returned {type(outputs).__name__}; it must return a "
            "list with one numpy array per model output"
        )
    return [np.asarray(o) for o in outputs]
