"""Running the widely used NNEF exporter (``torch_to_nnef``) from its own virtual
environment, for the benchmarks that compare t2n's artifacts with its artifacts.

That exporter stays outside t2n's dependencies: the benchmarks call it in a separate
Python (``--peer-venv``, default ``/tmp/peervenv``), made with::

    python -m venv --system-site-packages /tmp/peervenv
    /tmp/peervenv/bin/pip install torch_to_nnef==0.24.12 torch_to_nnef_llm==0.24.12

(``--system-site-packages``: the peer uses the torch, transformers and tract of the
Python that runs t2n, here torch 2.13.0+cpu and tract 0.23.9, so both exporters see the
same library versions.)

Without that environment the peer's columns say why they are empty, and the rest runs.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

DEFAULT_VENV = Path("/tmp/peervenv")
TRACT_VERSION = "0.23.9"
ERROR_MARK = "PEER-ERROR: "
"""Prefix of the line a peer-side script prints (on stderr) when the exporter refuses a model."""

ROOT = Path(__file__).resolve().parents[1]


def program(venv: Path, name: str) -> Path | str:
    """``venv/bin/name``, or why it cannot be used (with how to make the environment)."""
    path = venv / "bin" / name
    if not path.exists():
        return (f"skipped: {path} not found (python -m venv --system-site-packages {venv}; "
                "pip install torch_to_nnef torch_to_nnef_llm there: see benchmarks/peer.py)")
    return path


def stub_tract(folder: Path, version: str = TRACT_VERSION) -> Path:
    """A stand-in for the tract command line that only tells its version: the exporter
    asks for it (and downloads tract otherwise) even when it is told not to check."""
    stub = folder / "stub_tract"
    stub.write_text(f"#!/bin/sh\necho tract {version}\n")
    stub.chmod(0o755)
    return stub


def failure(stderr: str) -> str:
    """The line that says why the peer failed: the peer-side script's own report when
    there is one, else the last line of the traceback, at most 200 characters."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    marked = [line[len(ERROR_MARK):] for line in lines if line.startswith(ERROR_MARK)]
    return (marked or lines[-1:] or ["no message"])[-1][:200]


def run(venv: Path, name: str, argv: Sequence[str], timeout: float = 900) -> str | None:
    """Run ``venv/bin/name argv`` from the repository's root (so that ``-m benchmarks.X``
    finds this folder); None when it worked, else the reason (one line)."""
    command = program(venv, name)
    if isinstance(command, str):
        return command
    try:
        done = subprocess.run([str(command), *argv], capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout:.0f} s"
    if done.returncode != 0:
        return failure(done.stderr)
    return None
