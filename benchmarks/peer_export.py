"""Export one artifact-speed model with the other NNEF exporter (``torch_to_nnef``), in
its own virtual environment (see :mod:`benchmarks.peer`)::

    /tmp/peervenv/bin/python -m benchmarks.peer_export CASE.pt OUT_DIR STUB_TRACT TRACT_VERSION

``CASE.pt`` holds ``{"model": row name, "state": state_dict, "args": inputs}`` written
by :mod:`benchmarks.artifact_speed`: the architecture is rebuilt from
:mod:`benchmarks.speed_models` and given those weights, so the exporter compiles the same
model t2n compiled. The export uses ``export_model_to_nnef`` with ``TractNNEF`` for
``TRACT_VERSION`` in its default settings, except ``check_io=False`` (checking needs the tract
command line, which that exporter would download; the benchmark compares the outputs
itself). When the exporter refuses the model, the last stderr line starting with
``PEER-ERROR: `` says why (the exception's type and first line) and the exit code is 1.
This script runs without t2n.

A grid cell's text (:mod:`benchmarks.grid_models`) may stand in place of a row name. Many
cases in one process (the exporter takes seconds to import)::

    /tmp/peervenv/bin/python -m benchmarks.peer_export --batch CASES.json STUB_TRACT TRACT_VERSION

``CASES.json`` is a list of ``[CASE.pt, OUT_DIR]``; each case's outcome (the written path,
or ``PEER-ERROR: ...``) goes to ``OUT_DIR/peer_outcome.txt``.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import torch

from benchmarks.speed_models import MODELS

ERROR_MARK = "PEER-ERROR: "  # the same as benchmarks.peer.ERROR_MARK (that module is not needed here)


def export(case: Path, out: Path, stub: Path, version: str) -> Path:
    from torch_to_nnef import TractNNEF, export_model_to_nnef

    saved = torch.load(case, weights_only=True)
    name = saved["model"]
    if name in MODELS:
        model, _ = MODELS[name]()
    else:
        from benchmarks.grid_models import build

        model, _ = build(name)
    model.load_state_dict(saved["state"])
    target = TractNNEF(version=version, check_io=False, specific_tract_binary_path=stub)
    with torch.no_grad():
        written = export_model_to_nnef(model.eval(), tuple(saved["args"]), out / "model.nnef.tgz", target,
                                       log_level=logging.WARNING)
    return Path(written)


def batch(cases: Path, stub: Path, version: str) -> int:
    """Export every case of ``cases``; each outcome in its folder's ``peer_outcome.txt``."""
    for case, out in json.loads(cases.read_text()):
        try:
            outcome = str(export(Path(case), Path(out), stub, version))
        except Exception as exc:  # recorded for the benchmark, which names it in its table
            message = str(exc).strip().splitlines()
            outcome = f"{ERROR_MARK}{type(exc).__name__}: {message[0] if message else ''}"
        (Path(out) / "peer_outcome.txt").write_text(outcome)
    return 0


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--batch":
        return batch(Path(argv[1]), Path(argv[2]), argv[3])
    case, out, stub, version = argv
    try:
        print(export(Path(case), Path(out), Path(stub), version))
    except Exception as exc:  # reported to the benchmark, which names it in its table
        message = str(exc).strip().splitlines()
        print(f"{ERROR_MARK}{type(exc).__name__}: {message[0] if message else ''}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
