"""Replaying a debug bundle: the engine runs again on the bundle's artifact and inputs,
as the failed check ran it, and the comparison is printed.

``replay.json`` in the bundle says how: ``engine`` (``tract`` or ``khronos``),
``model`` (the artifact's name in the bundle), ``registries`` and ``symbols`` (tract),
``tolerance``, ``input_names`` and ``output_names`` (the keys of ``inputs.npz`` and
``expected.npz``). Exit status: 0 when the outputs match, 1 when they differ, 2 when
the engine refuses or crashes or the bundle cannot be replayed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from t2n.check.compare import compare
from t2n.errors import EngineError, T2NError

MATCH, MISMATCH, FAILED = 0, 1, 2


def _arrays(path: Path, names: Sequence[str]) -> list[np.ndarray]:
    with np.load(path) as data:
        return [np.asarray(data[n]) for n in names]


def run_engine(spec: dict[str, Any], model: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The engine's outputs for ``inputs`` (run in a child process, as checks run)."""
    from t2n.check.engines import run_khronos, run_tract

    engine = spec.get("engine")
    if engine == "tract":
        return run_tract(str(model), inputs, registries=spec.get("registries", ()),
                         symbols=spec.get("symbols") or None).outputs
    if engine == "khronos":
        return run_khronos(str(model), inputs).outputs
    raise EngineError(
        f"this bundle was checked with the engine {engine!r} ({spec.get('target')}); replay.py runs "
        "tract and the Khronos NNEF interpreter only: run that target's engine on the 'model' "
        "of the bundle with inputs.npz"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``replay BUNDLE_DIR [--tolerance T]``: run, print the report, return the exit status."""
    parser = argparse.ArgumentParser(prog="replay.py", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--tolerance", default=None,
                        help="exact, approximate, loose or very_loose (default: the check's own)")
    args = parser.parse_args(list(argv) if argv is not None else None)
    bundle: Path = args.bundle
    try:
        spec = json.loads((bundle / "replay.json").read_text())
        inputs = _arrays(bundle / "inputs.npz", spec["input_names"])
        expected = _arrays(bundle / "expected.npz", spec["output_names"])
    except (OSError, KeyError, ValueError) as exc:
        print(f"cannot replay {bundle}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return FAILED
    print(f"replaying {bundle} in {spec.get('engine_label', spec.get('engine'))}")
    try:
        outputs = run_engine(spec, bundle / spec["model"], inputs)
        report = compare(spec.get("engine_label", "engine"), spec["output_names"], outputs, expected,
                         args.tolerance or spec.get("tolerance", "approximate"))
    except T2NError as exc:
        print(f"{type(exc).__name__}: {exc}")
        return FAILED
    print(report)
    return MATCH if report.ok else MISMATCH


if __name__ == "__main__":
    sys.exit(main())
