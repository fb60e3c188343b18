"""Artifact speed over grids of shapes: for every layer whose form t2n chooses, how its
artifact runs in tract against the same model through tract's ONNX loader and through the
other NNEF exporter, cell by cell, and the worst ratio per case.

``python -m benchmarks.artifact_speed --grid [--quick] [--cases SUBSTR ...] [--points K]
[--repeat R] [--cache DIR] [--peer-venv DIR] [--write] [--json FILE] [--baseline FILE]``

A *case* is one layer in one form family (nearest upsampling in 2-D, an LSTM, attention
with a bool mask...); its *cells* are shapes. Per case, the axes that decide the form
(mode, number of spatial axes, factor, mask kind...) are taken in full; the shape axes
(channels 1-256, spatial sizes 8-512, batch 1 and 8, a convolution in front or not, how the
factor is spelled...) are sampled: ``--points`` cells per combination of the first, on a
latin sample of the second (each value of each shape axis appears about as often, the
seed fixed, so every run measures the same cells). A cell whose largest tensor would
exceed ``CAP`` elements has its spatial size, then its channels, lowered until it fits.
Cells the issue this grid answers named (nearest x2 of a 32-channel 128² map, with and
without a convolution before; the decoder block at 64²) are always in.

Each cell's three artifacts (t2n, ONNX, peer) are loaded and run in this one process, their
runs alternating, the side that runs first rotating (as :mod:`benchmarks.artifact_speed`),
timed in CPU time, each timed run right after an untimed one of the same artifact
(:func:`benchmarks.speed_engines.time_interleaved` says why);
the whole grid is measured ``--repeat`` times, each pass loading the artifacts again, and
cells whose median ratio is above 1 are measured twice more at the end. A cell's ratio is
the median over its passes of t2n's run time over the faster peer's in that pass (a peer
whose output is not PyTorch's does not count); its spread is the lowest and highest pass.
Load time is the CPU time to parse, type and optimise (``load`` then ``into_runnable``;
the shortest of three loads when they are short): t2n / ONNX, the median over passes. ONNX files and the peer's artifacts are cached under ``--cache``
(keyed by the cell's text and the torch version; the peer exports all missing cells in
one process); t2n's are made again by each run, so a run measures the t2n it imports.

A cell may export input axes as symbols (:func:`benchmarks.grid_models.dynamic_axes`:
the sorts along a dynamic axis): t2n's artifact and the ONNX file then have those axes
dynamic (the ONNX inputs named ``input_0``... as t2n names them), the peer is not
measured (its export here has no dynamic axes), and a fourth artifact, t2n's of the same
cell with the axes static, runs in the same rounds for reference, outside the ratio. Such
cases get a table of every cell (run times, dynamic over static) after the grid table,
between marks of their own. A side that loads but fails at its first run is recorded
and the others timed.

``--quick`` measures one cell per combination, once, briefly (a smoke test).
``--json`` keeps every measurement; ``--baseline`` adds a *before* column from such a
file of an earlier run (same cells); ``--write`` puts the table in
``benchmarks/RESULTS_ARTIFACT_SPEED.md`` between the ``GRID_BEGIN`` / ``GRID_END`` marks;
with ``--cases``, only the rows (and failure notes) of those cases are replaced, the
others kept, and a line names the run that measured them (give the ``--baseline`` the
written table had: its columns must match; without one, a written table with *before*
columns gets them, n/a, for these cases).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import random
import shlex
import statistics
import tempfile
import time
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks import peer, speed_engines
from benchmarks.grid_models import build, dynamic_axes, parse

CAP = 4_000_000
"""Largest tensor of a cell, in elements (16 MB of f32): keeps one run under ~50 ms."""

CAPS = {"sort": 2048 * 2048 * 4}
"""Families allowed more: a sort along a dynamic axis compares every pair of a row (``n``
rows of ``s²``), and its quadratic cost is what that case measures, so it goes up to one
row of 2048 or 8 rows of 1024 (0.2-0.3 s a run)."""

C = (1, 16, 64, 256)
S = (8, 32, 128, 512)
N = (1, 8)
CONV = (0, 1)

Case = tuple[str, str, dict[str, Sequence[Any]], dict[str, Sequence[Any]]]
"""(case name, family, axes taken in full, shape axes sampled)."""


def _upsampling() -> list[Case]:
    shape: dict[str, Sequence[Any]] = {"c": C, "s": S, "n": N, "conv": CONV, "spell": ("scale", "size")}
    out: list[Case] = []
    for mode, dims, name in [("nearest", 1, "nearest 1-D"), ("nearest", 2, "nearest 2-D"),
                             ("nearest", 3, "nearest 3-D"), ("linear", 1, "linear 1-D"),
                             ("linear", 2, "bilinear 2-D"), ("linear", 3, "trilinear 3-D"),
                             ("cubic", 2, "bicubic 2-D")]:
        extra = {} if mode == "nearest" else {"align": (0, 1)}
        out.append((name, f"upsample mode={mode} dims={dims}", {"f": (2, 3, 4, 1.5, 2.5)}, {**shape, **extra}))
    return out


def cases() -> list[Case]:
    shape: dict[str, Sequence[Any]] = {"c": C, "s": S, "n": N, "conv": CONV}
    seq: dict[str, Sequence[Any]] = {"c": (16, 64, 256), "s": (8, 64, 512), "n": N}
    return [
        *_upsampling(),
        ("max pool", "pool kind=max k=2", {"dims": (1, 2, 3)}, shape),
        ("max pool 3x3 stride 1", "pool kind=max3s1", {"dims": (1, 2, 3)}, shape),
        ("avg pool", "pool kind=avg k=2", {"dims": (1, 2, 3)}, shape),
        ("avg pool 3x3 stride 1", "pool kind=avg3s1", {"dims": (1, 2, 3)}, shape),
        ("adaptive avg pool", "pool kind=adaptive_avg", {"dims": (1, 2, 3), "out": (1, 4, 7)}, shape),
        ("adaptive max pool", "pool kind=adaptive_max", {"dims": (1, 2), "out": (1, 4, 7)}, shape),
        ("cumsum", "cumsum", {"axis": (1, 2)}, {"c": C, "s": (8, 64, 512, 4096), "n": N, "conv": CONV}),
        ("lstm", "rnn cell=lstm", {"bidir": (0, 1)}, seq),
        ("gru", "rnn cell=gru", {"bidir": (0, 1)}, seq),
        ("rnn (tanh)", "rnn cell=rnn", {"bidir": (0, 1)}, seq),
        ("attention", "attention", {"mask": ("none", "causal", "bool", "float", "pad")},
         {"c": (64, 256), "s": S, "n": N}),
        ("layer norm", "norm kind=layer", {}, shape),
        ("rms norm", "norm kind=rms", {}, shape),
        ("group norm", "norm kind=group", {}, shape),
        ("instance norm", "norm kind=instance", {}, shape),
        ("batch norm", "norm kind=batch", {}, shape),
        ("decoder block", "block kind=decoder", {}, {"c": (16, 32, 64), "s": (16, 64, 128), "n": N}),
        ("sequencer block", "block kind=sequencer", {}, {"c": (32, 64), "s": (8, 16, 32), "n": (1,)}),
        ("tied output head", "head kind=tied", {"v": (8192, 32000, 128256)},
         {"c": (256, 512, 1024, 2048), "s": (1, 8, 64), "n": (1,)}),
        *_sorts(),
    ]


SORT_S = (16, 64, 256, 1024, 2048)


def _sorts() -> list[Case]:
    """Sorts along a dynamic axis (written with comparisons, ``DynamicAxisSort``), every
    axis taken in full: the cost over the length is what they measure. Their cells also
    run t2n's artifact with the axis static (tract's top-k), see :func:`details`.
    ``torch.topk(x, k=x.shape[-1])`` is lowered as the same sort of the whole axis, so it
    has no case of its own."""
    return [
        ("sort, dynamic axis", "sort dynamic=1",
         {"op": ("sort", "argsort"), "desc": (0, 1), "n": (1, 8), "s": SORT_S}, {}),
        ("router sort, dynamic axis", "sort dynamic=1 op=router", {"s": SORT_S}, {}),
    ]


PINNED = {
    "nearest 2-D": ["upsample mode=nearest dims=2 f=2 c=32 s=128 n=1 conv=0 spell=scale",
                    "upsample mode=nearest dims=2 f=2 c=32 s=128 n=1 conv=1 spell=scale"],
    "decoder block": ["block kind=decoder c=32 s=64 n=1"],
    "sequencer block": ["block kind=sequencer c=64 s=16 n=1"],
}
"""Cells always measured: the shapes the issue named."""


def _largest(family: str, p: dict[str, Any]) -> int:
    """Elements of the largest tensor a cell makes (input, output or an intermediate)."""
    c, s, n = int(p.get("c", 1)), int(p.get("s", 1)), int(p.get("n", 1))
    dims = int(p.get("dims", 2 if family in ("norm", "block", "upsample", "pool") else 1))
    if family == "upsample":
        return int(n * c * (math.ceil(s * float(p["f"])) ** dims))
    if family == "attention":
        return n * max(1, c // 64) * s * max(s, 64)
    if family == "block":
        return n * c * (4 * s) ** 2 if p["kind"] == "decoder" else n * 2 * c * s * s
    if family == "rnn":
        return n * s * c * 8
    if family == "cumsum":
        return n * c * s
    if family == "head":  # the logits (the weight is no activation)
        return n * s * int(p["v"])
    if family == "sort":  # the comparisons of every pair of a row, along a dynamic axis
        return n * s * s
    return n * c * s ** dims


def _fit(family: str, p: dict[str, Any], axes: dict[str, Sequence[Any]]) -> dict[str, Any]:
    """``p`` with ``s``, then ``c``, lowered a level at a time until the cell fits ``CAP``
    (or the family's own, ``CAPS``)."""
    p, cap = dict(p), CAPS.get(family, CAP)
    for key in ("s", "c", "n"):
        levels = sorted(axes.get(key, ()))
        while _largest(family, p) > cap and key in p and levels.index(p[key]) > 0:
            p[key] = levels[levels.index(p[key]) - 1]
    return p


def _latin(axes: dict[str, Sequence[Any]], count: int, rng: random.Random) -> list[dict[str, Any]]:
    """``count`` points; each axis' values appear about equally often, in shuffled order."""
    columns = {}
    for key, values in axes.items():
        column = [values[i % len(values)] for i in range(count)]
        rng.shuffle(column)
        columns[key] = column
    return [{k: columns[k][i] for k in axes} for i in range(count)]


def _text(family: str, p: dict[str, Any]) -> str:
    return " ".join([family, *(f"{k}={v}" for k, v in p.items())])


def grid(points: int, only: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(case name, cell text) of every cell, in a fixed order; ``only``: substrings of
    case names."""
    out: list[tuple[str, str]] = []
    for name, family, full, shape in cases():
        if only and not any(s in name for s in only):
            continue
        rng = random.Random(name)
        fam, fixed = parse(family)
        combos = [dict(zip(full, values)) for values in itertools.product(*full.values())] or [{}]
        each = max(points, -(-4 * points // len(combos)))  # at least 4 x points cells per case
        sample = _latin(shape, each * len(combos), rng)
        seen = set()
        for i, combo in enumerate(combos):
            for point in sample[i * each:(i + 1) * each]:
                cell = _text(fam, _fit(fam, {**fixed, **combo, **point}, {**full, **shape}))
                if cell not in seen:
                    seen.add(cell)
                    out.append((name, cell))
        for cell in PINNED.get(name, []):
            if cell not in seen:
                seen.add(cell)
                out.append((name, cell))
    return out


# -- the artifacts ----------------------------------------------------------------

def _key(cell: str) -> str:
    return hashlib.sha1(f"{cell}|torch {torch.__version__}".encode()).hexdigest()[:16]


class Store:
    """Each cell's inputs, PyTorch output, ONNX file and peer artifact, on disk."""

    def __init__(self, root: Path, venv: Path) -> None:
        self.root, self.venv = root, venv
        root.mkdir(parents=True, exist_ok=True)

    def folder(self, cell: str) -> Path:
        return self.root / _key(cell)

    def prepare(self, cells: Iterable[str]) -> None:
        """Make what is missing: inputs and reference, ONNX files, then every missing peer
        artifact in one call of the peer's environment."""
        todo = []
        for cell in cells:
            d = self.folder(cell)
            if not (d / "case.pt").exists():
                d.mkdir(parents=True, exist_ok=True)
                model, args = build(cell)
                with torch.no_grad():
                    ref = model(*args).numpy()
                np.savez(d / "io.npz", reference=ref, **{f"input{i}": a.numpy() for i, a in enumerate(args)})
                torch.save({"model": cell, "state": model.state_dict(), "args": args}, d / "case.pt")
                (d / "cell.txt").write_text(cell)
            if speed_engines.onnx_missing() is None and not (d / "model.onnx").exists() and not (d / "onnx_error.txt").exists():
                model, args = build(cell)
                made = speed_engines.export_onnx(model, args, d / "model.onnx", dynamic_axes(cell))
                if isinstance(made, str):
                    (d / "onnx_error.txt").write_text(made)
            if speed_engines.peer_missing(self.venv) is None and not (d / "peer" / "peer_outcome.txt").exists():
                (d / "peer").mkdir(exist_ok=True)
                if dynamic_axes(cell):  # the peer's batch export makes every axis static
                    (d / "peer" / "peer_outcome.txt").write_text(f"{peer.ERROR_MARK}{PEER_STATIC}")
                else:
                    todo.append([str(d / "case.pt"), str(d / "peer")])
        if todo:
            listing = self.root / "peer_batch.json"
            listing.write_text(json.dumps(todo))
            print(f"exporting {len(todo)} cells with the peer...", flush=True)
            error = peer.run(self.venv, "python", ["-m", "benchmarks.peer_export", "--batch", str(listing),
                                                   str(peer.stub_tract(self.root)), peer.TRACT_VERSION],
                             timeout=6 * 3600)
            for _, out in todo:
                if not (Path(out) / "peer_outcome.txt").exists():
                    (Path(out) / "peer_outcome.txt").write_text(f"{peer.ERROR_MARK}{error or 'no outcome'}")

    def inputs(self, cell: str) -> tuple[list[np.ndarray], np.ndarray]:
        with np.load(self.folder(cell) / "io.npz") as z:
            n = len([k for k in z.files if k.startswith("input")])
            return [np.ascontiguousarray(z[f"input{i}"]) for i in range(n)], z["reference"]

    def onnx(self, cell: str) -> Path | str | None:
        d = self.folder(cell)
        if (d / "model.onnx").exists():
            return d / "model.onnx"
        return (d / "onnx_error.txt").read_text() if (d / "onnx_error.txt").exists() else None

    def peer(self, cell: str) -> Path | str | None:
        outcome = self.folder(cell) / "peer" / "peer_outcome.txt"
        if not outcome.exists():
            return None
        text = outcome.read_text().strip()
        return text.removeprefix(peer.ERROR_MARK) if text.startswith(peer.ERROR_MARK) else Path(text)


PEER_STATIC = "not measured: the peer's export here has no dynamic axes"


def export_t2n(cell: str, path: Path, dynamic: bool = True) -> tuple[Path, list[str]] | str:
    """t2n's artifact of ``cell`` (and the registries it needs), or why it failed, with
    the default options; ``dynamic=False``: the cell's dynamic axes (if any) static. A
    size the trace baked where it should follow a dynamic axis fails the export
    (``strict_dynamic_axes``, which changes nothing else): such an artifact would be
    measured at its traced size only."""
    import t2n

    model, args = build(cell)
    axes = dynamic_axes(cell) if dynamic else {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            art = t2n.export(model, args, path, target=t2n.TractNNEF.latest(), dynamic_axes=axes or None,
                             strict_dynamic_axes=bool(axes))
    except Exception as exc:  # the table names the cells t2n could not export
        return f"{type(exc).__name__}: {speed_engines.first_line(exc)}"
    return path, list(art.rendered.registries)


# -- measuring ----------------------------------------------------------------------

def _sources(cell: str, store: Store, arts: dict[str, tuple[Path, list[str]] | str]) -> dict[str, Any]:
    """Each side's (loader, file), or why it has none (a string), or None (not measured):
    t2n's artifacts (``t2n``; ``static``: the same cell with its dynamic axes static), the
    ONNX file and the peer's artifact."""
    import tract

    sources: dict[str, Any] = {}
    for side, art in arts.items():
        sources[side] = art if isinstance(art, str) else (speed_engines.nnef_loader(tract, art[1]), art[0])
    onnx_path, peer_path = store.onnx(cell), store.peer(cell)
    sources["onnx"] = (tract.onnx(), onnx_path) if isinstance(onnx_path, Path) else onnx_path
    if isinstance(peer_path, Path):
        sources["peer"] = (speed_engines.nnef_loader(tract, speed_engines.registries(peer_path)), peer_path)
    else:
        sources["peer"] = peer_path
    return sources


def _runs_once(runnables: dict[str, Any], inputs: list[np.ndarray], out: dict[str, Any]) -> None:
    """Drop (and record) the sides that load but fail when they run, so that the others are
    timed: tract's ONNX ``TopK`` loads with ``k`` from a symbolic shape and fails at its
    first run."""
    for side in list(runnables):
        try:
            runnables[side].run(list(inputs))
        except Exception as exc:  # tract could not run this side: recorded
            out[side] = {"error": f"tract could not run it: {_with_cause(exc)}"}
            del runnables[side]


def _with_cause(exc: BaseException) -> str:
    """The error's first line, and the first line under tract's ``Caused by:`` (the line
    that says why) in parentheses."""
    lines = [line.strip() for line in str(exc).splitlines()]
    after = lines[lines.index("Caused by:") + 1:] if "Caused by:" in lines else []
    cause = next((line.split(": ", 1)[-1] if line[:1].isdigit() else line for line in after if line), "")
    return speed_engines.first_line(exc) + (f" ({cause[:200]})" if cause else "")


def measure_cell(cell: str, store: Store, arts: dict[str, tuple[Path, list[str]] | str], min_seconds: float,
                 runs: int) -> dict[str, Any]:
    """One pass over one cell: each side's load and run time, errors, mismatches."""
    inputs, reference = store.inputs(cell)
    out: dict[str, Any] = {"load_average": os.getloadavg()[0]}
    runnables: dict[str, Any] = {}
    for side, src in _sources(cell, store, arts).items():
        if src is None:
            continue
        if isinstance(src, str):
            out[side] = {"error": src}
            continue
        try:
            runnables[side], load = _quickest_load(*src)
        except Exception as exc:  # tract refused the file: recorded
            out[side] = {"error": f"tract could not load it: {speed_engines.first_line(exc)}"}
            continue
        out[side] = {"load": load}
    _runs_once(runnables, inputs, out)
    if runnables:
        try:
            # CPU time, not wall time: on a machine whose cores other jobs share, a run longer
            # than the scheduler's slice waits for a core a varying number of times (a 2.5 ms
            # model measured 2.5 to 26 ms of wall time under a load average of 11; its CPU
            # time stayed at 2.5-2.6 ms); tract runs on the calling thread.
            medians, first = speed_engines.time_interleaved(runnables, inputs, runs, min_seconds,
                                                           clock=time.process_time, settle=True)
        except Exception as exc:  # a runnable failed at run time: recorded for every side
            for side in runnables:
                out[side] = {"error": f"tract could not run it: {speed_engines.first_line(exc)}"}
            return out
        for side in runnables:
            out[side]["run"] = medians[side]
            wrong = speed_engines.mismatch(first[side], reference)
            if wrong:
                out[side]["mismatch"] = wrong
    return out


def _quickest_load(loader: Any, path: Path) -> tuple[Any, float]:
    """The runnable and the shortest of up to three loads (one when a load takes more than
    50 ms)."""
    runnable, best = speed_engines.load_runnable(loader, path, time.process_time)
    for _ in range(2 if best < 0.05 else 0):
        runnable, seconds = speed_engines.load_runnable(loader, path, time.process_time)
        best = min(best, seconds)
    return runnable, best


def _ok(m: dict[str, Any], side: str) -> bool:
    return "run" in m.get(side, {}) and "mismatch" not in m[side]


def ratio(m: dict[str, Any]) -> float | None:
    """t2n's run time over the faster correct peer's, in one pass."""
    peers = [m[s]["run"] for s in ("onnx", "peer") if _ok(m, s)]
    return m["t2n"]["run"] / min(peers) if _ok(m, "t2n") and peers else None


def load_ratio(m: dict[str, Any]) -> float | None:
    return m["t2n"]["load"] / m["onnx"]["load"] if "load" in m.get("t2n", {}) and "load" in m.get("onnx", {}) \
        else None


def run_grid(cells: Sequence[tuple[str, str]], store: Store, scratch: Path, repeat: int, min_seconds: float,
             runs: int, extra: int) -> dict[str, list[dict[str, Any]]]:
    """Every cell measured ``repeat`` times (whole passes), then ``extra`` more times for
    cells whose median ratio is above 1."""
    arts: dict[str, dict[str, tuple[Path, list[str]] | str]] = {}
    for i, (_, cell) in enumerate(cells):
        arts[cell] = {"t2n": export_t2n(cell, scratch / f"cell{i}.nnef.tar")}
        if dynamic_axes(cell):  # for reference: the same cell with its axes static
            arts[cell]["static"] = export_t2n(cell, scratch / f"cell{i}.static.nnef.tar", dynamic=False)
    results: dict[str, list[dict[str, Any]]] = {cell: [] for _, cell in cells}

    def one_pass(todo: Sequence[str], label: str) -> None:
        start = time.perf_counter()
        for j, cell in enumerate(todo):
            results[cell].append(measure_cell(cell, store, arts[cell], min_seconds, runs))
            r = ratio(results[cell][-1])
            print(f"{label} {j + 1}/{len(todo)} {cell}: {'n/a' if r is None else f'{r:.2f}'} "
                  f"(load average {results[cell][-1]['load_average']:.1f})", flush=True)
        print(f"{label}: {time.perf_counter() - start:.0f} s", flush=True)

    for k in range(repeat):
        one_pass([c for _, c in cells], f"pass {k + 1}/{repeat}")
    again = [c for _, c in cells if (_median([ratio(m) for m in results[c]]) or 0) > 1.0]
    for k in range(extra if again else 0):
        one_pass(again, f"again {k + 1}/{extra}")
    return results


def _median(values: Iterable[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


# -- the report ---------------------------------------------------------------------

def summarize(cells: Sequence[tuple[str, str]], results: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per case: cell count, the worst median ratio (cell, spread), cells above 1.05, the
    worst load ratio (cell, times), failures."""
    out: dict[str, dict[str, Any]] = {}
    for name, cell in cells:
        s = out.setdefault(name, {"cells": 0, "worst": None, "over": 0, "load": None, "failed": [], "measured": 0,
                                  "load_over": 0})
        s["cells"] += 1
        passes = results.get(cell, [])
        ratios = [r for r in map(ratio, passes) if r is not None]
        for m in passes[:1]:
            for side in ("t2n", "static", "onnx", "peer"):
                why = m.get(side, {}).get("error") or m.get(side, {}).get("mismatch")
                if why:
                    s["failed"].append((side, cell, why))
        if ratios:
            s["measured"] += 1
            med = statistics.median(ratios)
            s["over"] += med > 1.05
            if s["worst"] is None or med > s["worst"]["ratio"]:
                s["worst"] = {"ratio": med, "cell": cell, "low": min(ratios), "high": max(ratios),
                              "t2n_ms": 1e3 * statistics.median(m["t2n"]["run"] for m in passes if _ok(m, "t2n"))}
        loads = [r for r in map(load_ratio, passes) if r is not None]
        if loads:
            med = statistics.median(loads)
            t2n_load = statistics.median(m["t2n"]["load"] for m in passes if "load" in m.get("t2n", {}))
            onnx_load = statistics.median(m["onnx"]["load"] for m in passes if "load" in m.get("onnx", {}))
            s["load_over"] += med > LOAD_LIMIT and t2n_load - onnx_load > LOAD_SLACK
            if s["load"] is None or med > s["load"]["ratio"]:
                s["load"] = {"ratio": med, "cell": cell, "t2n_ms": 1e3 * t2n_load, "onnx_ms": 1e3 * onnx_load}
    for s in out.values():
        s["failed"] = _failure_notes(s["failed"], s["cells"])
    return out


def _failure_notes(failed: list[tuple[str, str, str]], cells: int) -> list[str]:
    """``side at `cell`: why`` per failure; one line for a side that fails the same way
    at every cell of a case (more than one)."""
    everywhere: list[tuple[str, str]] = []
    for side, _, why in failed:
        if cells > 1 and (side, why) not in everywhere and sum(f[0] == side and f[2] == why for f in failed) == cells:
            everywhere.append((side, why))
    notes = [f"{side} at every cell ({cells}): {why}" for side, why in everywhere]
    return notes + [f"{side} at `{cell}`: {why}" for side, cell, why in failed if (side, why) not in everywhere]


LOAD_LIMIT = 1.5
LOAD_SLACK = 0.002
"""A cell's load counts as too slow above 1.5x the ONNX path's and more than 2 ms longer:
tract parses any NNEF text more slowly than an ONNX file of the same tiny graph (a
single max pool: 0.4-0.6 ms against 0.12 ms, tract's own NNEF dump of the ONNX model
included), a fixed cost that dominates the ratio of sub-millisecond loads."""


def _short(cell: str) -> str:
    return " ".join(cell.split()[1:])


def _written_has_before(doc: Path) -> bool:
    """Whether the grid table written in ``doc`` has the *before* columns."""
    text = doc.read_text() if doc.exists() else ""
    inside = text[text.index(GRID_BEGIN):text.index(GRID_END)] if GRID_BEGIN in text and GRID_END in text else ""
    return "| worst before |" in inside


def table(summary: dict[str, dict[str, Any]], before: dict[str, dict[str, Any]] | None = None) -> str:
    """The grid table; ``before`` (even empty): the columns of an earlier run's worst cells."""
    head = ["case", "cells", *(["worst before", "where before"] if before is not None else []), "worst t2n / best peer", "spread",
            "where", "cells > 1.05", "worst load t2n / ONNX", "where (t2n / ONNX load ms)", "slow loads"]
    lines = ["| " + " | ".join(head) + " |",
             "|---|---:|" + ("---:|---|" if before is not None else "") + "---:|---:|---|---:|---:|---|---:|"]
    notes = []
    for name, s in summary.items():
        w, ld = s["worst"], s["load"]
        cells = [name, f"{s['measured']}/{s['cells']}"]
        if before is not None:
            b = before.get(name, {}).get("worst")
            cells += [f"{b['ratio']:.2f}", f"`{_short(b['cell'])}`"] if b else ["n/a", ""]
        cells += ([f"{w['ratio']:.2f}", f"{w['low']:.2f}-{w['high']:.2f}", f"`{_short(w['cell'])}`"]
                  if w else ["n/a", "", ""])
        cells.append(str(s["over"]))
        cells += ([f"{ld['ratio']:.2f}", f"`{_short(ld['cell'])}` ({ld['t2n_ms']:.1f} / {ld['onnx_ms']:.1f})"]
                  if ld else ["n/a", ""])
        cells.append(str(s["load_over"]))
        lines.append("| " + " | ".join(cells) + " |")
        notes += [f"* {name}: {f}" for f in s["failed"]]
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def _detail_row(cell: str, passes: list[dict[str, Any]]) -> str:
    def ms(side: str) -> str:
        got = [m[side]["run"] for m in passes if _ok(m, side)]
        return f"{1e3 * statistics.median(got):.3g}" if got else "n/a"

    over = [m["t2n"]["run"] / m["static"]["run"] for m in passes if _ok(m, "t2n") and _ok(m, "static")]
    onnx = [m["t2n"]["run"] / m["onnx"]["run"] for m in passes if _ok(m, "t2n") and _ok(m, "onnx")]
    cells = [f"`{_short(cell)}`", ms("t2n"), ms("static"), f"{statistics.median(over):.3g}" if over else "n/a",
             f"{min(over):.3g}-{max(over):.3g}" if over else "", ms("onnx"),
             f"{statistics.median(onnx):.2f}" if onnx else "n/a"]
    return "| " + " | ".join(cells) + " |"


def details(cells: Sequence[tuple[str, str]], results: dict[str, list[dict[str, Any]]], argv: Sequence[str],
            load: str) -> dict[str, str]:
    """Per case whose cells have dynamic axes (and so a ``static`` side): every cell's run
    times, t2n's with the axes dynamic and static, the ONNX path's with them dynamic."""
    rows: dict[str, list[str]] = {}
    for name, cell in cells:
        passes = results.get(cell, [])
        if any("static" in m for m in passes):
            rows.setdefault(name, []).append(_detail_row(cell, passes))
    intro = (f"`python -m benchmarks.artifact_speed --grid {shlex.join(portable(argv))}` (load average {load}). "
             "Run time of each cell in ms (CPU time, median of the passes, the artifacts' runs alternating): "
             "t2n's artifact with the axis dynamic (`dynamic_axes`, the default options), t2n's artifact of the "
             "same model with the axis static, their ratio (lowest and highest pass), the ONNX path with the "
             "axis dynamic and t2n's time over it (n/a: the notes under the grid table say why).")
    head = ["| cell | t2n, axis dynamic | t2n, axis static | dynamic / static | spread | ONNX, axis dynamic "
            "| t2n / ONNX |", "|---|---:|---:|---:|---:|---:|---:|"]
    return {name: "\n".join([f"#### Every cell of *{name}*", "", intro, "", *head, *r]) + "\n"
            for name, r in rows.items()}


CELLS_BEGIN = "<!-- every cell of {}: written by `python -m benchmarks.artifact_speed --grid --write` -->"
CELLS_END = "<!-- end of every cell of {} -->"


def _write_details(old: str, tables: dict[str, str]) -> str:
    """``old`` with each case's table of every cell between its marks (after the grid
    table when the marks are not there yet)."""
    missing = ""
    for name, text in tables.items():
        begin, end = CELLS_BEGIN.format(name), CELLS_END.format(name)
        block = f"{begin}\n{text}{end}"
        if begin in old and end in old:
            old = old[:old.index(begin)] + block + old[old.index(end) + len(end):]
        else:
            missing += f"\n\n{block}"
    at = old.index(GRID_END) + len(GRID_END) if GRID_END in old else len(old)
    return old[:at] + missing + old[at:]


GRID_BEGIN = "<!-- grid table: written by `python -m benchmarks.artifact_speed --grid --write` -->"
GRID_END = "<!-- end of the grid table -->"


def portable(argv: Sequence[str]) -> list[str]:
    """``argv`` as the results file quotes it: files by their names, the peer's
    environment as PEER_VENV (no paths of the machine that measured)."""
    out = list(argv)
    for i in range(1, len(out)):
        if out[i - 1] == "--peer-venv":
            out[i] = "PEER_VENV"
        elif out[i - 1] in ("--json", "--baseline", "--cache"):
            out[i] = Path(out[i]).name
    return out


def header(argv: Sequence[str], results: dict[str, list[dict[str, Any]]], seconds: float, venv: Path,
           extra: int) -> str:
    import platform

    import tract

    loads = [m["load_average"] for ms in results.values() for m in ms]
    load = f"{min(loads):.1f}-{max(loads):.1f}" if loads else "n/a"
    return (f"## Over grids of shapes\n\n`python -m benchmarks.artifact_speed --grid {shlex.join(portable(argv))}` (tract "
            f"{tract.version()}, torch {torch.__version__}, torch_to_nnef {speed_engines.peer_version(venv)}, "
            f"{os.cpu_count()} cores, {platform.machine()}; load average {load} during the run, "
            f"{seconds / 60:.0f} min; {len(results)} cells, the cells above 1 measured {extra} more times, each "
            "timed run right after an untimed run of the same artifact). Per case: the cell with the "
            "highest median ratio of t2n's run time (CPU time, the three artifacts' runs alternating) to the "
            "faster of tract's ONNX path and torch_to_nnef, "
            "the lowest and highest of its passes, the number of cells above 1.05, the highest median "
            "ratio of load times (CPU time to parse, type and optimise) to the ONNX path's, and the number of "
            "cells whose load is slow (above 1.5x the ONNX path's and more than 2 ms longer). Cells are "
            "`family key=value...` of `benchmarks/grid_models.py`: c channels, s spatial size (sequence "
            "length for recurrent layers and attention), n batch, conv 1 when a convolution precedes, f the "
            "factor, spell how it is given (scale_factor or size). A cell counts only where a peer gives "
            "PyTorch's output: the adaptive pools with uneven windows have none (the ONNX exporter refuses "
            "them, torch_to_nnef's output has the wrong shape).\n\n")


def merge_rows(block: str, text: str, names: Sequence[str], argv: Sequence[str], load: str) -> str:
    """The written grid table ``block`` with the rows and failure notes of the cases
    ``names`` taken from ``text`` (a table of those cases measured alone, with the same
    columns) and a line naming the run that measured them; the other rows stay."""
    def row_of(line: str) -> str | None:
        return line.split("|")[1].strip() if line.startswith("| ") else None

    def note_of(line: str) -> str | None:
        return line[2:].split(":")[0] if line.startswith("* ") else None

    new = text.splitlines()
    head = [line for line in new if line.startswith("| case |")]
    lines = block.splitlines()
    if not head or head[0] not in lines:
        raise ValueError("the written grid table has other columns: write the whole grid (no --cases), "
                         "or pass --baseline as the written table was made")
    rows = {row_of(line): line for line in new if row_of(line) in names}
    notes = [line for line in new if note_of(line) in names]
    said = f"Rows of {', '.join(names)} "
    out: list[str] = []
    notes_at = None  # the new notes go where the first old one of these cases was
    for i, line in enumerate(lines):
        if row_of(line) in rows:
            out.append(rows[row_of(line)])
        elif note_of(line) in names:
            notes_at = len(out) if notes_at is None else notes_at
        elif not line.startswith(said) and not (i and lines[i - 1].startswith(said)):
            out.append(line)
    missing = [rows[n] for n in names if n in rows and rows[n] not in out]
    at = max(i for i, line in enumerate(out) if line.startswith("|")) + 1
    out[at:at] = missing
    if notes_at is None:
        notes_at = max((i for i, line in enumerate(out) if line.startswith("* ")), default=at + len(missing) - 1) + 1
    else:
        notes_at += len(missing)
    out[notes_at:notes_at] = notes
    table_at = out.index(head[0])
    out[table_at:table_at] = [f"Rows of {', '.join(names)} measured again by `python -m benchmarks.artifact_speed "
                              f"--grid {shlex.join(portable(argv))}` (load average {load}); the other rows are the run above.", ""]
    return "\n".join(out) + "\n"


def write_doc(doc: Path, text: str, cases: Sequence[str] = (), argv: Sequence[str] = (), load: str = "",
              tables: dict[str, str] | None = None) -> None:
    """The grid table between the marks; with ``cases``, only those cases' rows (merge_rows);
    ``tables``: cases' tables of every cell (:func:`details`), each between marks of its own."""
    old = doc.read_text() if doc.exists() else ""
    if cases and GRID_BEGIN in old and GRID_END in old:
        inside = old[old.index(GRID_BEGIN) + len(GRID_BEGIN) + 1:old.index(GRID_END)]
        text = merge_rows(inside, text, cases, argv, load)
    block = f"{GRID_BEGIN}\n{text}{GRID_END}"
    if GRID_BEGIN in old and GRID_END in old:
        new = old[:old.index(GRID_BEGIN)] + block + old[old.index(GRID_END) + len(GRID_END):]
    elif speed_engines.KEEP in old:
        at = old.index(speed_engines.KEEP) + len(speed_engines.KEEP)
        new = old[:at] + "\n\n" + block + "\n" + old[at:]
    else:
        new = old + "\n" + block + "\n"
    doc.write_text(_write_details(new, tables or {}))


def main(argv: Sequence[str]) -> str:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.artifact_speed --grid",
                                     description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="one cell per combination, one pass, briefly")
    parser.add_argument("--cases", nargs="*", default=(), help="substrings of case names to measure")
    parser.add_argument("--points", type=int, default=3, help="sampled cells per combination of form axes")
    parser.add_argument("--repeat", type=int, default=3, help="passes over the grid")
    parser.add_argument("--extra", type=int, default=2, help="more passes for cells above 1")
    parser.add_argument("--min-seconds", type=float, default=0.1, help="about this much CPU time per artifact per pass")
    parser.add_argument("--runs", type=int, default=5, help="at least this many runs per artifact per pass")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "t2n-artifact-grid")
    parser.add_argument("--peer-venv", type=Path, default=peer.DEFAULT_VENV)
    parser.add_argument("--json", type=Path, help="write every measurement there")
    parser.add_argument("--baseline", type=Path, help="a --json file of an earlier run: its worst ratios as 'before'")
    parser.add_argument("--list", action="store_true", help="print the cells and stop")
    parser.add_argument("--write", action="store_true", help=f"write the table in {speed_engines.DOC.name}")
    ns = parser.parse_args(argv)
    if ns.quick:
        ns.points, ns.repeat, ns.extra, ns.min_seconds, ns.runs = 1, 1, 0, 0.05, 3
    cells = grid(ns.points, ns.cases)
    if ns.list:
        text = "\n".join(f"{name}: {cell}" for name, cell in cells)
        print(text)
        return text
    store = Store(ns.cache, ns.peer_venv)
    start = time.perf_counter()
    store.prepare(c for _, c in cells)
    with tempfile.TemporaryDirectory() as scratch:
        results = run_grid(cells, store, Path(scratch), ns.repeat, ns.min_seconds, ns.runs, ns.extra)
    return report(ns, argv, cells, results, time.perf_counter() - start)


def report(ns: Any, argv: Sequence[str], cells: Sequence[tuple[str, str]], results: dict[str, list[dict[str, Any]]],
           seconds: float) -> str:
    """The grid table (and the tables of every cell of the cases with dynamic axes),
    printed, kept (``--json``) and written (``--write``)."""
    summary = summarize(cells, results)
    before = None
    if ns.baseline:
        saved = json.loads(ns.baseline.read_text())
        before = summarize([tuple(c) for c in saved["cells"]], saved["results"])  # type: ignore[misc]
    elif ns.write and ns.cases and _written_has_before(speed_engines.DOC):
        before = {}  # the written table's columns; these cases have no "before" (n/a)
    notes = [n for n in (speed_engines.onnx_missing(), speed_engines.peer_missing(ns.peer_venv)) if n]
    text = header(argv, results, seconds, ns.peer_venv, ns.extra) + table(summary, before) + "".join(f"\n{n}\n" for n in notes)
    loads = [m["load_average"] for ms in results.values() for m in ms]
    load = f"{min(loads):.1f}-{max(loads):.1f}" if loads else "n/a"
    tables = details(cells, results, argv, load)
    print(text + "".join(f"\n{t}" for t in tables.values()))
    if ns.json:
        ns.json.write_text(json.dumps({"argv": list(argv), "cells": cells, "results": results}, indent=1))
    if ns.write:
        write_doc(speed_engines.DOC, text, list(summary) if ns.cases else (), argv, load, tables)
    return text
