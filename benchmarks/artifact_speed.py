"""How fast t2n's artifacts run in tract, against the same models exported by torch.onnx
and by the widely used NNEF exporter (``torch_to_nnef``).

Each model (:mod:`benchmarks.speed_models`) is exported three times: by t2n
(``TractNNEF``), by ``torch.onnx.export`` (TorchScript exporter, opset 17, loaded by
tract's ONNX loader) and by ``torch_to_nnef``'s ``export_model_to_nnef`` (``TractNNEF``
for tract 0.23.9, its default settings), the last in that exporter's own virtual
environment (``--peer-venv``, default ``/tmp/peervenv``; made with ``python -m venv
--system-site-packages /tmp/peervenv`` then ``/tmp/peervenv/bin/pip install
torch_to_nnef==0.24.12 torch_to_nnef_llm==0.24.12``, see :mod:`benchmarks.peer`) from the
weights and inputs t2n's side saved, so all three compile the same model. The three
files are loaded and run by the tract Python wheel in this one process: load time
(parse, type and optimise: ``load`` then ``into_runnable``), median run time, the ratio
t2n / ONNX and the ratio of t2n to the faster of the two peers (below 1: t2n is
faster). Runs alternate (t2n, ONNX, peer, t2n, ...), so that a burst of load from
other processes slows every side alike. Each artifact's first output is compared with
PyTorch's; a difference is named under the table. ``ALTERNATIVES`` are t2n's optional
tract forms (``TractNNEF`` options and passes), measured against the same peers.

``python -m benchmarks.artifact_speed [--only NAME ...] [--runs N] [--min-seconds S]
[--peer-venv DIR] [--write]`` prints the table (fast models run more than N times, about
S seconds per artifact, so that their median spans more than one burst of other load); ``--write`` also writes it at the top of
``benchmarks/RESULTS_ARTIFACT_SPEED.md``, keeping what follows the ``KEEP`` line there
(hand-written notes, earlier tables). The ONNX columns need the ``onnx`` package (``pip
install t2n[bench]``), the peer columns the peer's environment; without them those
columns say ``n/a`` and the table says why. A model a peer cannot export is named under
the table with the peer's error.

``python -m benchmarks.artifact_speed --grid ...`` measures grids of shapes instead, per
layer whose form t2n chooses, and reports the worst ratio per case
(:mod:`benchmarks.artifact_grid`).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

import t2n
from benchmarks import peer
from benchmarks.speed_engines import (
    DOC,
    KEEP,
    export_onnx,
    first_line,
    load_runnable,
    mismatch,
    nnef_loader,
    onnx_missing,
    peer_missing,
    peer_version,
    registries,
    time_interleaved,
)
from benchmarks.speed_models import MODELS, build

PEER = "torch_to_nnef"
SIDES = ("t2n", "onnx", "peer")

LLAMA = "llama (4 layers, 128 tokens)"
ALTERNATIVES: dict[str, tuple[str, dict[str, Any], tuple[str, ...]]] = {
    "upsample nearest 64²→256², upsample_with_debox": ("upsample nearest 64²→256²", {"upsample_with_debox": True}, ()),
    "attention with masks (128), reify_sdpa_operator": ("attention with masks (128)", {"reify_sdpa_operator": True}, ()),
    f"{LLAMA}, reify_rope + reify_rms_norm + reify_sdpa_operator":
        (LLAMA, {"reify_sdpa_operator": True}, ("reify-rope", "reify-rms-norm")),
    f"{LLAMA}, reify_rope": (LLAMA, {}, ("reify-rope",)),
    f"{LLAMA}, reify_rms_norm": (LLAMA, {}, ("reify-rms-norm",)),
    f"{LLAMA}, reify_sdpa_operator": (LLAMA, {"reify_sdpa_operator": True}, ()),
}
"""Row name → (model, ``TractNNEF`` options, passes by name)."""


def _passes(names: Sequence[str]) -> list[Any]:
    from t2n.passes.reify_transformers import ReifyRmsNorm, ReifyRope

    known = {"reify-rope": ReifyRope, "reify-rms-norm": ReifyRmsNorm}
    return [known[n]() for n in names]


def _export_peer(name: str, model: torch.nn.Module, args: tuple[torch.Tensor, ...], folder: Path,
                 venv: Path) -> Path | str:
    """The peer's artifact of the same model (its weights and inputs handed over in a
    file), or why the peer could not export it (one line)."""
    folder.mkdir()
    torch.save({"model": name, "state": model.state_dict(), "args": args}, folder / "case.pt")
    error = peer.run(venv, "python", ["-m", "benchmarks.peer_export", str(folder / "case.pt"), str(folder),
                                      str(peer.stub_tract(folder)), peer.TRACT_VERSION])
    if error is not None:
        return error
    written = sorted(folder.glob("model.nnef*"))
    return written[0] if written else f"wrote no model.nnef* in {folder}"


class Peers:
    """Each model's ONNX and peer artifacts (a path, or why there is none) and PyTorch
    output, made once per run and shared by the model's rows (its alternatives are
    measured against the same files). A side whose tool is missing is left out."""

    def __init__(self, folder: Path, venv: Path) -> None:
        self.folder, self.venv = folder, venv
        self.made: dict[str, dict[str, Any]] = {}

    def get(self, name: str, model: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> dict[str, Any]:
        if name not in self.made:
            sub = self.folder / f"model{len(self.made)}"
            sub.mkdir()
            with torch.no_grad():
                made: dict[str, Any] = {"reference": model(*args).numpy()}
            if onnx_missing() is None:
                made["onnx"] = export_onnx(model, args, sub / "model.onnx")
            if peer_missing(self.venv) is None:
                made["peer"] = _export_peer(name, model, args, sub / "peer", self.venv)
            self.made[name] = made
        return self.made[name]


def _load_peers(tract: Any, made: dict[str, Any], row: dict[str, Any]) -> tuple[dict[str, Any], dict[str, float]]:
    """The peers' runnables and load times; a file a peer could not write, or tract could
    not load, is recorded in ``row`` (``onnx_error`` / ``peer_error``)."""
    runnables, loads = {}, {}
    for side in ("onnx", "peer"):
        path = made.get(side)
        if isinstance(path, str):
            row[f"{side}_error"] = path
        elif path is not None:
            loader = tract.onnx() if side == "onnx" else nnef_loader(tract, registries(path))
            try:
                runnables[side], loads[side] = load_runnable(loader, path)
            except Exception as exc:  # tract refused the file: the table says so
                row[f"{side}_error"] = f"tract could not load it: {first_line(exc)}"
    return runnables, loads


def measure(name: str, runs: int, tmp: Path, peers: Peers, min_seconds: float = 0.0) -> dict[str, Any]:
    import tract

    model_name, options, passes = ALTERNATIVES.get(name, (name, {}, ()))
    model, args = build(model_name)
    inputs = [np.ascontiguousarray(a.numpy()) for a in args]
    row: dict[str, Any] = {"model": name}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        art = t2n.export(model, args, tmp / "model.nnef.tar", target=t2n.TractNNEF.latest(**options),
                         passes=_passes(passes))
    made = peers.get(model_name, model, args)
    runnables, loads = _load_peers(tract, made, row)
    runnables["t2n"], loads["t2n"] = load_runnable(nnef_loader(tract, art.rendered.registries),
                                                     tmp / "model.nnef.tar")
    order = {k: runnables[k] for k in SIDES if k in runnables}
    medians, first = time_interleaved(order, inputs, runs, min_seconds)
    for k in order:
        row[k] = {"load": loads[k], "run": medians[k]}
        wrong = mismatch(first[k], made["reference"])
        if wrong:
            row.setdefault("mismatch", []).append(f"{k}: {wrong}")
    return row


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


def _side_cells(r: dict[str, Any], side: str) -> list[str]:
    if side in r:
        return [_ms(r[side]["load"]), _ms(r[side]["run"])]
    return ["failed", "failed"] if f"{side}_error" in r else ["n/a", "n/a"]


def _ratios(r: dict[str, Any]) -> list[str]:
    """run t2n/ONNX, and t2n over the faster peer (n/a where no peer ran)."""
    t2n_run = r["t2n"]["run"]
    best = min((r[s]["run"] for s in ("onnx", "peer") if s in r), default=None)
    return [f"{t2n_run / r['onnx']['run']:.2f}" if "onnx" in r else "n/a",
            f"{t2n_run / best:.2f}" if best else "n/a"]


COLUMNS = ("model", "t2n load ms", "t2n run ms", "ONNX load ms", "ONNX run ms", "peer load ms", "peer run ms",
           "run t2n/ONNX", "t2n / best peer")


def table(rows: Sequence[dict[str, Any]], notes: Sequence[str | None] = ()) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|---" + "|---:" * (len(COLUMNS) - 1) + "|"]
    for r in rows:
        cells = [r["model"], *_side_cells(r, "t2n"), *_side_cells(r, "onnx"), *_side_cells(r, "peer"), *_ratios(r)]
        lines.append("| " + " | ".join(cells) + " |")
    failed = [f"* {r['model']}: {tool} failed ({r[key]})" for r in rows
              for tool, key in (("torch.onnx", "onnx_error"), (PEER, "peer_error")) if key in r]
    failed += [f"* {r['model']}: output differs ({'; '.join(r['mismatch'])})" for r in rows if r.get("mismatch")]
    if failed:
        lines += ["", *failed]
    lines += [f"\n{note}" for note in notes if note]
    return "\n".join(lines) + "\n"


def header(runs: int, min_seconds: float, venv: Path) -> str:
    import platform

    import tract

    return (f"# Artifact speed in tract: t2n against torch.onnx and {PEER}\n\n`python -m benchmarks.artifact_speed "
            f"--runs {runs} --min-seconds {min_seconds:g} --write` (tract {tract.version()}, torch {torch.__version__}, {PEER} "
            f"{peer_version(venv)}, {os.cpu_count()} cores, {platform.machine()}). Times in ms; load = parse, "
            "type and optimise; run = median of the runs after one warm-up, the artifacts' runs alternating "
            f"(t2n, ONNX, peer, each first in turn; at least {runs} runs each, more for fast models: about {min_seconds:g} s "
            f"per artifact, at most 2000 runs). *peer* is {PEER}'s `export_model_to_nnef` (`TractNNEF` for tract "
            f"{peer.TRACT_VERSION}, default settings) of the same model and weights; *best peer* is the faster "
            "of the ONNX path and that peer.\n\n")


def _summary_row(cells: list[str]) -> str | None:
    """``| model | run t2n/ONNX | t2n / best peer |`` from a row of the full table (or of the
    earlier six-column table, which had no peer)."""
    if len(cells) == len(COLUMNS):
        return f"| {cells[0]} | {cells[-2]} | {cells[-1]} |"
    return f"| {cells[0]} | {cells[-1]} | n/a |" if len(cells) == 6 else None


def results_section(doc: Path = DOC) -> list[str]:
    """The summary that ``benchmarks/RESULTS.md`` shows: each model's run-time ratios from
    the table ``--write`` last wrote, and a link to the whole file."""
    text = doc.read_text() if doc.exists() else ""
    top = text[:text.index(KEEP)] if KEEP in text else text
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in top.splitlines()
            if line.startswith("| ") and not line.startswith("| model")]
    lines = ["## Artifact speed in tract", "",
             "How fast t2n's artifacts run in tract against the same models exported by `torch.onnx` "
             f"(loaded by tract's ONNX loader) and by {PEER} (one process, the artifacts' runs alternating; "
             "below 1: t2n is faster; *best peer* is the faster of the two). Load and run times, the command, "
             f"the earlier forms and notes on noise: [{doc.name}]({doc.name}).", ""]
    if not rows:
        return lines + ["(no table yet: `python -m benchmarks.artifact_speed --write`)", ""]
    lines += ["| model | run t2n/ONNX | t2n / best peer |", "|---|---:|---:|"]
    lines += [s for s in map(_summary_row, rows) if s]
    return lines + [""]


def main(argv: Sequence[str] | None = None) -> str:
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if "--grid" in args:  # the grid of shapes (benchmarks/artifact_grid.py) has options of its own
        from benchmarks import artifact_grid

        return artifact_grid.main([a for a in args if a != "--grid"])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--only", nargs="*", help="substrings of model names to run")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--min-seconds", type=float, default=1.0,
                        help="run fast models more than --runs times, about this long per artifact")
    parser.add_argument("--peer-venv", type=Path, default=peer.DEFAULT_VENV,
                        help=f"the virtual environment holding {PEER} (see benchmarks/peer.py)")
    parser.add_argument("--write", action="store_true", help=f"write {DOC.name}")
    ns = parser.parse_args(argv)
    names = [n for n in [*MODELS, *ALTERNATIVES] if not ns.only or any(s in n for s in ns.only)]
    notes = [onnx_missing(), peer_missing(ns.peer_venv)]
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        peers = Peers(Path(scratch), ns.peer_venv)
        for name in names:
            with tempfile.TemporaryDirectory() as tmp:
                rows.append(measure(name, ns.runs, Path(tmp), peers, ns.min_seconds))
            print(table(rows[-1:]).splitlines()[2], flush=True)
    text = table(rows, notes)
    print(text)
    if ns.write:
        kept = DOC.read_text() if DOC.exists() else ""
        kept = kept[kept.index(KEEP):] if KEEP in kept else ""
        DOC.write_text(header(ns.runs, ns.min_seconds, ns.peer_venv) + text + ("\n" + kept if kept else ""))
    return text


if __name__ == "__main__":
    main()
