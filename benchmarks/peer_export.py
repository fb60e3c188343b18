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
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import torch

from benchmarks.speed_models import MODELS

ERROR_MARK = "PEER-ERROR: "  # the same as benchmarks.peer.ERROR_MARK (that module is not needed here)


def export(case: Path, out: Path, stub: Path, version: str) -> Path:
    from torch_to_nnef import TractNNEF, export_model_to_nnef

    saved = torch.load(case, weights_only=True)
    model, _ = MODELS[saved["model"]]()
    model.load_state_dict(saved["state"])
    target = TractNNEF(version=version, check_io=False, specific_tract_binary_path=stub)
    with torch.no_grad():
        written = export_model_to_nnef(model.eval(), tuple(saved["args"]), out / "model.nnef.tgz", target,
                                       log_level=logging.WARNING)
    return Path(written)


def main(argv: list[str]) -> int:
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
