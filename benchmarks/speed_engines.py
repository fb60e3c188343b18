"""What the artifact-speed benchmarks share: where results are written, making the ONNX
and peer artifacts, loading NNEF with the registries it declares, and checking outputs.
Used by :mod:`benchmarks.artifact_speed` (the model rows) and :mod:`benchmarks.artifact_grid`
(the grids of shapes)."""

from __future__ import annotations

import importlib
import re
import statistics
import tarfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks import peer

DOC = Path(__file__).with_name("RESULTS_ARTIFACT_SPEED.md")


KEEP = "<!-- --write replaces everything above this line and keeps what follows -->"


def onnx_missing() -> str | None:
    """Why the ONNX columns cannot be filled, or None when they can."""
    try:
        importlib.import_module("onnx")
    except ImportError:
        return "the `onnx` package is not installed (pip install 't2n[bench]'): ONNX columns skipped"
    return None


def peer_version(venv: Path) -> str:
    """The torch_to_nnef version installed in the peer's environment ("?" when none is)."""
    found = sorted(venv.glob("lib/python*/site-packages/torch_to_nnef-*.dist-info"))
    return found[0].name.removeprefix("torch_to_nnef-").removesuffix(".dist-info") if found else "?"


def registries(path: Path) -> list[str]:
    """The tract registries an NNEF archive's ``graph.nnef`` declares (``extension tract_registry X``)."""
    with tarfile.open(path) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("graph.nnef"))
        handle = tar.extractfile(member)
        text = handle.read().decode() if handle else ""
    return re.findall(r"extension\s+tract_registry\s+(\w+)", text)


def nnef_loader(tract: Any, registries: Sequence[str]) -> Any:
    loader = tract.nnef()
    for reg in registries:
        method = {"tract_transformers": "with_tract_transformers", "tract_extra": "with_tract_extra"}.get(reg)
        if method is not None:
            loader = getattr(loader, method)()
    return loader


def time_interleaved(runnables: dict[str, Any], inputs: Sequence[np.ndarray], runs: int, min_seconds: float = 0.0,
                     *, clock: Callable[[], float] = time.perf_counter, settle: bool = False
                     ) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Median run time of each runnable by ``clock``, their runs alternating, after one
    warm-up each (whose output is returned, to compare with PyTorch's). The side that
    runs first in a round rotates, so that none always runs right after the same other
    artifact (right after the peer's cumulative-sum loop, t2n's artifact ran ~1.5 % slower
    than a copy of itself). Fast models get more than ``runs`` rounds, enough for each
    side to run about ``min_seconds`` (at most 2000 rounds): a median over a few
    milliseconds of a shared machine's time is one burst of someone else's load.

    ``settle``: each timed run follows an untimed run of the same artifact, so that every
    side is timed warm whatever ran before it. Without it, a 70 µs attention ran 80-200 µs
    right after the other exporter's ``tract_transformers_sdpa`` (which runs on several
    threads) and 118 µs after a 0.1 ms pause, against 69-71 µs for it and the ONNX path
    back to back (``attention mask=none c=256 s=32 n=1`` of the grid: 1.9x with the peer
    in the rounds, 0.97x settled)."""
    times: dict[str, list[float]] = {k: [] for k in runnables}
    first, warm = {}, []
    for k, r in runnables.items():
        start = clock()
        first[k] = np.asarray(r.run(list(inputs))[0].to_numpy())
        warm.append(clock() - start)
    rounds = min(max(runs, int(min_seconds / max(max(warm, default=1.0), 1e-5))), max(runs, 2000))
    order = list(runnables)
    for i in range(rounds):
        for k in order[i % len(order):] + order[:i % len(order)]:  # each side first in turn
            if settle:
                runnables[k].run(list(inputs))
            start = clock()
            runnables[k].run(list(inputs))
            times[k].append(clock() - start)
    return {k: statistics.median(v) for k, v in times.items()}, first


def load_runnable(loader: Any, path: Path, clock: Callable[[], float] = time.perf_counter) -> tuple[Any, float]:
    """(runnable, seconds of ``clock`` to load and optimise it): the model rows time the
    wall clock, the grids CPU time (``time.process_time``)."""
    start = clock()
    model = loader.load(str(path))
    if hasattr(model, "into_model"):  # ONNX: an inference model, typed from the file's facts
        model = model.into_model()
    runnable = model.into_runnable()
    return runnable, clock() - start


def export_onnx(model: torch.nn.Module, args: tuple[torch.Tensor, ...], path: Path,
                dynamic_axes: dict[str, dict[int, str]] | None = None) -> Path | str:
    """The ONNX file, or why torch.onnx refused the model (one line). ``dynamic_axes``
    (by input name, the inputs then named ``input_0``, ``input_1``... as t2n names them):
    those axes as symbols."""
    names = [f"input_{i}" for i in range(len(args))] if dynamic_axes else None
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, args, str(path), dynamo=False, opset_version=17, input_names=names,
                              dynamic_axes=dynamic_axes or None)
    except Exception as exc:  # the table says which model torch.onnx refused, and why
        return f"{type(exc).__name__}: {first_line(exc)}"
    return path


def first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:200] if lines else ""


def peer_missing(venv: Path) -> str | None:
    """Why the peer columns cannot be filled, or None when they can."""
    found = peer.program(venv, "python")
    return f"torch_to_nnef columns n/a: {found}" if isinstance(found, str) else None


def mismatch(got: np.ndarray, want: np.ndarray) -> str | None:
    """Why an artifact's output is not PyTorch's (shape, or an error beyond f32 rounding), or None."""
    if got.shape != want.shape:
        return f"output shape {list(got.shape)}, PyTorch's {list(want.shape)}"
    err = float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0
    return f"max abs error {err:.2g} against PyTorch" if err > 1e-3 * max(1.0, float(np.max(np.abs(want)))) else None
