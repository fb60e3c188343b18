"""The ``t2n`` command line: ``t2n export``, ``t2n inspect``, ``t2n check``, ``t2n tensors``.

Subcommands are imported only when called (see :mod:`t2n.cli.main`); other code adds
its own with :func:`register_subcommand`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from t2n.cli.main import SUBCOMMANDS, Subcommand, cli, register_subcommand


def main(argv: Sequence[str] | None = None) -> None:
    """The ``t2n`` console script: runs the command and exits with its status."""
    from t2n.cli.main import main as run

    sys.exit(run(argv))


__all__ = ["SUBCOMMANDS", "Subcommand", "cli", "main", "register_subcommand"]
