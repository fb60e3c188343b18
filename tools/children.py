"""Run a sweep's cases in child processes, so that one case that hangs or kills its
process costs that case only (the sweeps of ``tools.llm_families`` and ``tools.zoo_sweep``).

A child is ``python -m MODULE try NAME...``: it prints one JSON line per case, in order,
with the case's name under ``key``. When a child stops printing for ``timeout`` seconds
or dies, its current case is recorded as failed in stage ``process`` and a new child
takes the cases left.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_in_children(module: str, pending: list[str], key: str, timeout: float,
                    record: Callable[[dict[str, Any]], None], extra: tuple[str, ...] = ()) -> None:
    """Each case of ``pending`` through ``python -m module try [extra] case...``; every
    outcome (a dict) is passed to ``record`` as it comes."""
    pending = list(pending)
    while pending:
        child = subprocess.Popen([sys.executable, "-m", module, "try", *extra, *pending],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
        assert child.stdout is not None
        deadline = time.monotonic() + timeout
        current = pending[0]
        while True:
            ready, _, _ = select.select([child.stdout], [], [], max(0.0, deadline - time.monotonic()))
            line = child.stdout.readline() if ready else None
            if line is None or (line == "" and child.poll() is not None):
                child.kill()
                why = f"timed out after {timeout:.0f} s" if line is None else "the process died"
                result = {key: current, "outcome": "error", "stage": "process", "message": why}
            elif not line.startswith("{"):
                continue
            else:
                result = json.loads(line)
            record(result)
            print(json.dumps(result), flush=True)
            pending.remove(result[key])
            if line is None or line == "" or not pending:
                break
            current, deadline = pending[0], time.monotonic() + timeout
        child.wait()
