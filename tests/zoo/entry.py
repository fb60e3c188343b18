"""One zoo case: what docs/zoo.md names and how to build the model and its inputs."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import torch

CACHE = Path(__file__).resolve().parents[2] / ".cache"
"""Where .ci/run installs libraries kept out of site-packages (torchaudio: ``torchaudio_models``)."""


@attrs.frozen
class Entry:
    """One architecture: its group in docs/zoo.md, the model class, how to make inputs.

    ``make`` builds a model of another library (torchaudio, diffusers): it returns the model
    in eval mode and its example args and kwargs, importing that library itself, so the
    zoo's list is known without importing it."""

    name: str
    group: str
    model: str
    inputs: str | Callable[[Any], tuple[tuple, dict]] = ""
    config: dict[str, Any] = attrs.field(factory=dict)
    common: bool = True
    make: Callable[[], tuple[torch.nn.Module, tuple, dict]] | None = None
    needs: str = ""  # the library ``make`` imports: without it the case fails, saying how to install it


def installed(name: str) -> bool:
    """Whether the library ``name`` can be imported: from sys.path, or apart in ``CACHE``."""
    return importlib.util.find_spec(name) is not None or (CACHE / name / name).is_dir()
