"""Output shapes of an artifact as tract infers them (``t2n inspect --output-shapes``):
graph.nnef declares only the inputs' shapes. tract loads the artifact in a child
process (``python -m t2n.cli.facts PATH [REGISTRY...]``), so a crash in tract is
reported instead of ending the command."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from t2n.errors import EngineCrashedError, EngineError

_LOADERS = {"tract_transformers": "with_tract_transformers", "tract_extra": "with_tract_extra",
            "tract_pulse": "with_pulse", "pulse": "with_pulse", "tract_onnx": "with_onnx"}


def parse_fact(text: str) -> dict[str, Any]:
    """tract's ``1,S,2,f32`` as ``{"dtype": "f32", "shape": [1, "S", 2]}``."""
    *dims, dtype = text.split(",")
    return {"dtype": dtype, "shape": [int(d) if d.isdigit() else d for d in dims]}


def output_facts(path: Path, registries: Sequence[str], timeout: float = 300) -> list[dict[str, Any]]:
    """The dtype and shape of each output, in order, from tract (in a child process)."""
    from t2n.check.engines import require_engine

    require_engine("tract", engine="tract")
    proc = subprocess.run([sys.executable, "-m", "t2n.cli.facts", str(path), *registries],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode < 0:
        raise EngineCrashedError(f"tract died (signal {-proc.returncode}) while loading {path} to infer its "
                                 f"output shapes; inspect it without --output-shapes", phase="loading")
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1:] or ["no message"]
        raise EngineError(f"tract could not load {path} to infer its output shapes: {last[0]}", phase="loading")
    return [parse_fact(f) for f in json.loads(proc.stdout)]


def _main(argv: Sequence[str]) -> None:
    import tract

    loader = tract.nnef()
    for reg in argv[1:]:
        if reg in _LOADERS:
            loader = getattr(loader, _LOADERS[reg])()
    model = loader.load(argv[0])
    print(json.dumps([model.output_fact(i).dump() for i in range(model.output_count())]))


if __name__ == "__main__":
    _main(sys.argv[1:])
