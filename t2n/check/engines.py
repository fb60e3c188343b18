"""Running artifacts in the real engines, in a child process.

tract aborts the whole process on some malformed graphs (a conv border it does not
know, an out-of-range scatter index, too few inputs). Every run therefore happens
in a long-lived worker process: a crash becomes :class:`EngineCrashedError` and the
next run starts a fresh worker.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from t2n.check import protocol
from t2n.errors import EngineCrashedError, EngineError

DEFAULT_TIMEOUT = 600.0


@attrs.frozen
class EngineResult:
    outputs: list[np.ndarray]
    input_facts: list[str]
    output_facts: list[str]


PHASES = {
    "starting": "starting up, before it read the model",
    "loading": "loading the model (parsing graph.nnef, reading the tensors)",
    "optimizing": "preparing the loaded model to run (optimising it into a plan)",
    "running": "running the model on the inputs",
}
"""What the engine was doing, by the phase marker the worker sent last."""


def describe_phase(phase: str) -> str:
    return PHASES.get(phase, phase)


class EngineWorker:
    """One child process (``python -m t2n.check.worker``) serving engine runs.

    Thread-safe; after a crash or a time-out the next call starts a fresh child.
    ``command`` replaces the child's command line (tests use it to run a worker
    that misbehaves); the child must speak :mod:`t2n.check.protocol` like
    :func:`t2n.check.worker.serve`.
    """

    def __init__(self, command: Sequence[str] | None = None) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._command = list(command) if command else [sys.executable, "-m", "t2n.check.worker"]

    @property
    def pid(self) -> int | None:
        """The child's process id, while one runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def _start(self) -> None:
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", "1")
        self._proc = subprocess.Popen(
            self._command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, env=env,
            bufsize=0,  # see t2n.check.protocol: select() must see every pending byte
        )

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        _close_pipes(proc)

    def call(self, kind: str, kwargs: Mapping[str, Any], timeout: float = DEFAULT_TIMEOUT) -> EngineResult:
        """Run one request; the reply, or a typed error that says which phase failed."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            proc = self._proc
            assert proc is not None and proc.stdin is not None and proc.stdout is not None
            phase = "starting"
            try:
                protocol.send(proc.stdin, (kind, dict(kwargs)))
                deadline = time.monotonic() + timeout
                while True:
                    ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
                    if not ready:
                        proc.kill()
                        self._stop()
                        raise EngineError(
                            f"{kind} did not answer within {timeout:.0f} s while "
                            f"{describe_phase(phase)}; the run was stopped", phase=phase)
                    reply = protocol.recv(proc.stdout)
                    if reply[0] != "phase":
                        break
                    phase = reply[1]
            except (EOFError, OSError) as exc:
                raise self._crashed(proc, kind, kwargs.get("path"), phase) from exc
        if reply[0] == "ok":
            res = reply[1]
            return EngineResult(list(res["outputs"]), res["input_facts"], res["output_facts"])
        phase = reply[3] if len(reply) > 3 else phase
        raise EngineError(
            f"{kind} refused {kwargs.get('path')} while {describe_phase(phase)}: {reply[1]}", phase=phase
        )

    def _crashed(self, proc: subprocess.Popen[bytes], kind: str, path: Any, phase: str) -> EngineCrashedError:
        """The error for an engine process that died mid-request, once it is reaped (the
        next request starts a new one); it says the crash need not mean a wrong artifact."""
        code = proc.wait()
        self._proc = None
        _close_pipes(proc)
        return EngineCrashedError(
            f"the {kind} engine process died ({_describe_exit(code)}) while "
            f"{describe_phase(phase)} for {path}. The crash is in the engine: "
            f"{kind} aborts on some graphs and inputs instead of refusing them, so the "
            "artifact is not necessarily wrong (look for out-of-range indices or "
            "shapes in the inputs, and for ops this engine version does not handle)",
            phase=phase,
        )


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    """Close our ends of a finished child's pipes (a pipe to a dead child can fail to
    flush: that is not an error here)."""
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "no exit code"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


_WORKER: EngineWorker | None = None


def default_worker() -> EngineWorker:
    global _WORKER
    if _WORKER is None:
        _WORKER = EngineWorker()
        atexit.register(_WORKER.close)
    return _WORKER


def require_engine(*modules: str, engine: str) -> None:
    """Refuse at once, with what to install, when an engine's Python package is missing
    (exporting works without them; checking needs them: the ``t2n[check]`` extra)."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise EngineError(
            f"cannot run the artifact in {engine}: the Python package(s) {', '.join(missing)} "
            "are not installed. What to do: pip install 't2n[check]' (tract, nnef, nnef-tools)"
        )


def run_tract(
    path: str, inputs: Sequence[np.ndarray], *, registries: Sequence[str] = (),
    symbols: Mapping[str, int] | None = None, worker: EngineWorker | None = None,
) -> EngineResult:
    """Load ``path`` (dir, .tar or .tgz) in tract and run it on ``inputs``."""
    require_engine("tract", engine="tract")
    return (worker or default_worker()).call(
        "tract", {"path": str(path), "inputs": [np.asarray(x) for x in inputs],
                  "registries": list(registries), "symbols": dict(symbols) if symbols else None},
    )


def run_khronos(path: str, inputs: Sequence[np.ndarray], *, lowered: Sequence[str] = (),
                worker: EngineWorker | None = None) -> EngineResult:
    """Parse ``path`` (a directory) with the Khronos parser and run it in the nnef-tools
    PyTorch interpreter, both with their default options, as a user runs them.
    ``lowered`` names fragments (added to the target by the user) to expand first."""
    require_engine("nnef", "nnef_tools", engine="the Khronos NNEF interpreter")
    return (worker or default_worker()).call(
        "khronos", {"path": str(path), "inputs": [np.asarray(x) for x in inputs],
                    "lowered": list(lowered)}
    )
