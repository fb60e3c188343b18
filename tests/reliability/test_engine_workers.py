"""Engine workers close their pipes when they die, and a check honours the artifact's
``tract_assert`` bounds, which tract reads but does not enforce.

Cases tried (10): a worker that exits at once, one killed by SIGKILL mid-phase, one
that stops answering, and a real tract abort (an out-of-range gather index) leave no
unclosed pipe (no ``ResourceWarning``); a check at a size an assertion excludes
(``S <= 8`` at ``S = 16``, the default ``S >= 1`` at ``S = 0``, a sum of two symbols),
through ``Artifact.check``, ``symbols=`` and ``t2n check`` (exit 1), fails with
``SymbolBoundsError`` naming the assertion and the sizes, before tract runs; a check
inside the bounds, and an assertion of a named mode (``pp: P == 0``, one scenario
among others), are not refused.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch

import t2n
from t2n.check import EngineWorker, run_tract
from t2n.errors import CheckError, EngineCrashedError, EngineError, SymbolBoundsError


def _unclosed_after(fn) -> list[str]:
    """ResourceWarnings raised while ``fn`` runs and its garbage is collected."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ResourceWarning)
        with contextlib.suppress(EngineError, CheckError):
            fn()
        gc.collect()
    return [str(w.message) for w in seen if issubclass(w.category, ResourceWarning)]


def _worker(body: str) -> EngineWorker:
    script = textwrap.dedent("""
        import os, signal, sys, time
        from t2n.check.protocol import recv, send
        out = sys.stdout.buffer
        recv(sys.stdin.buffer)
    """) + textwrap.dedent(body)
    return EngineWorker([sys.executable, "-c", script])


@pytest.mark.parametrize("body", ["sys.exit(3)", "send(out, ('phase', 'loading'))\nos.kill(os.getpid(), 9)"],
                         ids=["exits", "sigkill"])
def test_a_crashed_worker_leaves_no_open_pipe(body):
    def crash():
        worker = _worker(body)
        with pytest.raises(EngineCrashedError):
            run_tract("m.nnef.tgz", [], worker=worker)
        assert worker.pid is None

    assert _unclosed_after(crash) == []


def test_a_worker_that_stops_answering_leaves_no_open_pipe():
    def hang():
        worker = _worker("send(out, ('phase', 'running'))\ntime.sleep(60)")
        with pytest.raises(EngineError):
            worker.call("tract", {"path": "m"}, timeout=1.0)

    assert _unclosed_after(hang) == []


def test_a_tract_abort_leaves_no_open_pipe():
    class Gather(torch.nn.Module):
        def forward(self, x, idx):
            return x[idx] * 2.0

    art = t2n.compile(Gather(), (torch.rand(5, 3), torch.tensor([0, 2])))
    worker = EngineWorker()
    bad = np.array([0, 99], dtype=art.example_inputs[1].dtype)

    def abort():
        with pytest.raises(EngineCrashedError):
            run_tract(str(_saved(art)), [art.example_inputs[0], bad], worker=worker)

    try:
        assert _unclosed_after(abort) == []
    finally:
        worker.close()


def _saved(art):
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp(prefix="t2n-test-")) / "m"
    return art.save(path)


class Double(torch.nn.Module):
    def forward(self, x, y):
        return x * 2, y + 1


@pytest.fixture(scope="module")
def bounded():
    return t2n.compile(Double(), (torch.rand(1, 4), torch.rand(1, 3)), input_names=["x", "y"],
                       dynamic_axes={"x": {1: "S"}, "y": {1: "P"}},
                       custom_extensions=["tract_assert P >= 0", "tract_assert S <= 8", "tract_assert S + P < 12",
                                          "tract_assert pp: P == 0", "tract_assert tg: S == 1"])


def _arrays(s: int, p: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    x, y = np.random.rand(1, s).astype(np.float32), np.random.rand(1, p).astype(np.float32)
    return [x, y], [x * 2, y + 1]


@pytest.mark.parametrize("s, p, named", [(16, 0, "S <= 8"), (5, 9, "S + P < 12"), (0, 0, "S >= 1")])
def test_a_check_at_sizes_the_artifact_excludes_fails_naming_the_assertion(bounded, s, p, named):
    ins, outs = _arrays(s, p)
    with pytest.raises(SymbolBoundsError) as info:
        bounded.check(inputs=ins, expected=outs)
    assert named in str(info.value) and f"S = {s}" in str(info.value)
    assert isinstance(info.value, CheckError)


def test_a_check_inside_the_bounds_runs(bounded):
    ins, outs = _arrays(8, 0)
    assert bounded.check(inputs=ins, expected=outs).ok
    ins, outs = _arrays(1, 10)  # tg: S == 1 holds, pp: P == 0 does not: modes are alternatives
    assert bounded.check(inputs=ins, expected=outs).ok


def test_the_check_command_refuses_sizes_the_artifact_excludes(bounded, tmp_path):
    from cli.cli_support import make_runner

    art = bounded.save(tmp_path / "m")
    ins, outs = _arrays(16, 0)
    np.savez(tmp_path / "in.npz", x=ins[0], y=ins[1])
    np.savez(tmp_path / "out.npz", output_0=outs[0], output_1=outs[1])
    done = make_runner()("check", art, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "out.npz")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "SymbolBoundsError" in done.stderr and "S <= 8" in done.stderr and "S = 16" in done.stderr
    np.savez(tmp_path / "in.npz", x=_arrays(4, 0)[0][0], y=_arrays(4, 0)[0][1])
    np.savez(tmp_path / "out.npz", output_0=_arrays(4, 0)[0][0] * 0, output_1=_arrays(4, 0)[0][1] * 0)
    ok = make_runner()("check", art, "--inputs", tmp_path / "in.npz")
    assert ok.returncode == 0, ok.stderr


def test_the_process_holds_no_stray_worker_pipes():
    """The default worker's pipes are the only ones a check keeps open."""
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(3):
        worker = _worker("sys.exit(3)")
        with pytest.raises(EngineCrashedError):
            run_tract("m", [], worker=worker)
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) <= before
