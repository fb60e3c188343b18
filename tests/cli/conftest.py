"""Running the ``t2n`` command as users do: the installed console script, in a child
process, on files these fixtures write (helpers in ``cli_support.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .cli_support import Run, make_runner, write_artifact, write_factories


@pytest.fixture(scope="session")
def t2n_cli() -> Run:
    """``t2n_cli(*args, cwd=...)``: run ``t2n ARGS`` (in this process, as a fresh one would);
    the finished process (text output, exit status)."""
    return make_runner()


@pytest.fixture(scope="module")
def factories(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with ``models.py`` (a torch model factory), ``fast.py`` (factories that
    return wrong things, without importing torch) and ``broken.py`` (fails to import)."""
    return write_factories(tmp_path_factory.mktemp("factories"))


@pytest.fixture
def hand_artifact(tmp_path: Path) -> Path:
    """A small artifact written by hand (no torch): ``out = inp + w``, ``total = sum(out)``."""
    return write_artifact(tmp_path / "hand")
