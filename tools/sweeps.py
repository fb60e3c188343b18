"""What the sweeps of whole libraries share (``tools.zoo_sweep`` for transformers,
``tools.diffusers_sweep`` for diffusers): weight noise, the finiteness test, short
messages, compiling one built model with both frontends, the locked outcome file, the
page's table and the command line.

An outcome is one JSON-able dict per case: its name under the sweep's key, ``class``,
``built`` (which shrinking made the model) and, per frontend, ``status``, ``error`` and
``detail``.
"""

from __future__ import annotations

import argparse
import fcntl
import json
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

FRONTENDS = ("jit", "export")
STATUSES = ("exact", "refused", "FAILED", "not built")
MAX_PARAMETERS = 30_000_000
"""A model over this size after shrinking is not built: its defaults are a released model."""


class NotBuilt(Exception):
    """The sweep could not make a model and inputs that PyTorch runs."""


def perturb(model: Any) -> None:
    """Noise on every weight: heads a class initializes to zeros (a detector's query
    scores, a router, an adaLN-Zero modulation) would make every score tie or every
    output zero, and top-k's choice among equals is arbitrary in PyTorch as in tract."""
    import torch

    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            if p.dtype.is_floating_point:
                p.add_(torch.randn(p.shape, generator=g) * 0.05)


def finite(out: Any) -> bool:
    """Whether every float tensor of ``out`` is finite (a comparison with NaN says nothing)."""
    from t2n.frontend.io import flatten

    return all(bool(t.isfinite().all()) for t in flatten(out)[0] if t.is_floating_point())


def short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:160]


def shapes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    parts = [str(tuple(a.shape)) for a in args] + [f"{k}={tuple(v.shape)}" for k, v in kwargs.items()
                                                  if hasattr(v, "shape")]
    return "inputs " + ", ".join(parts)


def first_that_runs(model: Any, candidates: Iterable[tuple[tuple[Any, ...], dict[str, Any]]], how: str,
                    problems: list[str]) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The first candidate inputs PyTorch's forward runs on with finite tensor outputs
    (None when none does, or when forward returns no tensor); why the others did not
    goes to ``problems``."""
    import torch

    for args, kwargs in candidates:
        try:
            with torch.no_grad():
                out = model(*args, **kwargs)
        except Exception as exc:
            problems.append(f"{how} config, {shapes(args, kwargs)}: {type(exc).__name__}: {short(exc)}")
            continue
        if not holds_tensor(out):
            problems.append(f"{how} config: forward returns no tensor")
            return None
        if not finite(out):
            problems.append(f"{how} config, {shapes(args, kwargs)}: PyTorch's output holds NaN or infinities")
            continue
        return args, kwargs
    return None


def holds_tensor(out: Any) -> bool:
    """Whether ``out`` holds a tensor (a placeholder's forward returns None: nothing to export)."""
    from t2n.frontend.io import flatten

    return bool(flatten(out)[0])


def not_built(record: dict[str, Any], exc: BaseException) -> dict[str, Any]:
    """``record`` with every frontend ``not built``, saying why."""
    message = str(exc) if isinstance(exc, NotBuilt) else f"{type(exc).__name__}: {short(exc)}"
    for frontend in FRONTENDS:
        record[frontend] = {"status": "not built", "error": "", "detail": message[:300]}
    return record


def compile_with_each_frontend(record: dict[str, Any], name: str, model: Any, args: tuple[Any, ...],
                               kwargs: dict[str, Any]) -> dict[str, Any]:
    """``record`` with the outcome of the zoo's ``run`` (compile for tract, check against
    the model's own forward) for each frontend."""
    from tests.zoo.entry import Entry
    from tests.zoo.run import run

    for frontend in FRONTENDS:
        entry = Entry(name=name, group="sweep", model=record["class"], make=lambda: (model, args, kwargs))
        outcome = run(entry, frontend)
        record[frontend] = {"status": outcome.status, "error": outcome.error, "detail": outcome.detail}
    return record


def load(results: Path) -> dict[str, Any]:
    return json.loads(results.read_text()) if results.exists() else {}


def recorder(results: Path, key: str) -> Callable[[dict[str, Any]], None]:
    """What ``run_in_children`` calls with each outcome: a child that hung or died is a
    FAILED case; the file is rewritten under a lock (sweeps of other cases may run beside)."""

    def record(result: dict[str, Any]) -> None:
        if result.get("stage") == "process":  # the child hung or died on this case
            name = result[key]
            result = {key: name, "class": "", "built": "",
                      **{fe: {"status": "FAILED", "error": "process", "detail": result["message"]}
                         for fe in FRONTENDS}}
            result[key] = name  # the key may be ``class`` itself
        with open(results.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            found = load(results)
            found[result[key]] = result
            results.write_text(json.dumps(dict(sorted(found.items())), indent=1) + "\n")

    return record


def settled(result: dict[str, Any] | None) -> bool:
    """Whether ``--resume`` leaves a case as it is (it is tried again when it was not built)."""
    return result is not None and result["jit"]["status"] != "not built"


def table(results: dict[str, Any], known_failures: dict[str, str], unit: str,
          heading: list[str], first_cells: Callable[[str, dict[str, Any]], list[str]]) -> str:
    """The counts per frontend and one row per case: ``first_cells`` names it (under
    ``heading``), then its status per frontend and a note (its known failure, the details)."""
    counts = {fe: Counter(r[fe]["status"] for r in results.values()) for fe in FRONTENDS}
    lines = [f"| frontend | {unit} | " + " | ".join(STATUSES) + " |", "|---|---|" + "---|" * len(STATUSES)]
    for fe in FRONTENDS:
        lines.append(f"| {fe} | {len(results)} | " + " | ".join(str(counts[fe][s]) for s in STATUSES) + " |")
    columns = [*heading, *FRONTENDS, "note"]
    lines += ["", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for name, r in sorted(results.items()):
        cells = [r[fe]["status"] + (f": {r[fe]['error']}" if r[fe]["error"] else "") for fe in FRONTENDS]
        lines.append("| " + " | ".join([*first_cells(name, r), *cells, _note(name, r, known_failures)]) + " |")
    return "\n".join(lines)


def _note(name: str, r: dict[str, Any], known_failures: dict[str, str]) -> str:
    notes = [known_failures[name]] if name in known_failures else []
    for fe in FRONTENDS:
        if r[fe]["status"] == "FAILED" and name in known_failures:
            continue
        if r[fe]["status"] != "exact" and r[fe]["detail"] and (fe == "jit" or r[fe] != r["jit"]):
            notes.append(("" if r["jit"] == r["export"] else f"{fe}: ") + r[fe]["detail"])
    return "; ".join(notes).replace("|", "\\|").replace("\n", " ")[:240]


def main(argv: list[str] | None, description: str, one: str, plural: str,
         sweep: Callable[[list[str], float, bool], None], try_one: Callable[[str], dict[str, Any]],
         doc: Callable[[bool], int]) -> int:
    """The command line of a sweep: ``sweep [NAME ...] [--timeout S] [--resume]``,
    ``try NAME...`` (one JSON line per case, as ``tools.children`` reads them) and
    ``doc [--check]``; ``one`` and ``plural`` name the cases (``type``, ``types``)."""
    parser = argparse.ArgumentParser(description=description)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sweep")
    s.add_argument(plural, nargs="*")
    s.add_argument("--timeout", type=float, default=150, help=f"seconds per frontend of one {one}")
    s.add_argument("--resume", action="store_true",
                   help=f"skip the {plural} already in the results (except those not built)")
    t = sub.add_parser("try")
    t.add_argument(plural, nargs="+")
    d = sub.add_parser("doc")
    d.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "sweep":
        sweep(getattr(args, plural), args.timeout, args.resume)
    elif args.command == "try":
        for name in getattr(args, plural):
            print(json.dumps(try_one(name)), flush=True)
    else:
        return doc(args.check)
    return 0
