"""Code that runs inside the engine child process (imports only numpy and the engine).

Kept free of t2n imports beyond this module so the child starts fast and a crash
in the engine takes down only the child.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from t2n.check.protocol import recv, send

Phase = Callable[[str], None]
"""Tells the parent what the engine is about to do, before it does it: if the engine
then kills the process, the parent knows which step it died in."""


def _no_phase(_: str) -> None:
    return None


def run_tract(path: str, inputs: list[np.ndarray], registries: list[str],
              symbols: dict[str, int] | None, phase: Phase = _no_phase) -> dict[str, Any]:
    phase("loading")
    import tract

    loader = tract.nnef()
    for reg in registries:
        if reg == "tract_transformers":
            loader = loader.with_tract_transformers()
        elif reg == "tract_extra":
            loader = loader.with_tract_extra()
        elif reg in ("tract_pulse", "pulse"):
            loader = loader.with_pulse()
        elif reg == "tract_onnx":
            loader = loader.with_onnx()
    model = loader.load(path)
    if symbols:
        model.transform(tract.SetSymbols(dict(symbols)))
    n = model.input_count()
    if n != len(inputs):
        # tract-python segfaults when given fewer inputs than the model has.
        raise ValueError(f"the model has {n} inputs but {len(inputs)} were given")
    facts = [model.input_fact(i).dump() for i in range(n)]
    out_facts = [model.output_fact(i).dump() for i in range(model.output_count())]
    phase("optimizing")
    runnable = model.into_runnable()
    phase("running")
    outs = runnable.run([np.require(x, requirements="C") for x in inputs])
    return {"outputs": [o.to_numpy() for o in outs], "input_facts": facts, "output_facts": out_facts}


def run_khronos(path: str, inputs: list[np.ndarray], phase: Phase = _no_phase,
                lowered: list[str] | None = None) -> dict[str, Any]:
    """Parse and run as a user does: ``nnef.load_graph(path)`` and the nnef-tools
    PyTorch interpreter with their default options. ``lowered`` names fragments the
    user added to the target, which a consumer must be told to expand; t2n's own
    output defines none."""
    phase("loading")
    import nnef
    from nnef_tools.interpreter.pytorch import Interpreter

    if lowered:
        graph = nnef.load_graph(path, lowered=list(lowered))
        interp = Interpreter(path, device="cpu", decomposed=list(lowered))
    else:
        graph = nnef.load_graph(path)
        interp = Interpreter(path, device="cpu")
    nnef.infer_shapes(graph)
    phase("running")
    outs = interp([np.asarray(x) for x in inputs])
    return {"outputs": [outs[name] for name in graph.outputs], "input_facts": [], "output_facts": []}


class _PhaseReporter:
    """Sends each phase marker to the parent (flushed) and remembers the last one."""

    def __init__(self, out: Any) -> None:
        self.out = out
        self.last = "starting"

    def __call__(self, name: str) -> None:
        self.last = name
        send(self.out, ("phase", name))


def serve() -> None:
    """Answer requests on stdin until EOF: ("tract"|"khronos", kwargs) → any number of
    ("phase", step) markers, then ("ok", result) or ("error", message, traceback, step).

    Replies go to the original stdout; anything the engines print goes to stderr.
    """
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = os.fdopen(os.dup(0), "rb")
    while True:
        try:
            req = recv(inp)
        except EOFError:
            return
        if req is None:
            return
        kind, kwargs = req
        phase = _PhaseReporter(out)
        try:
            run = run_tract if kind == "tract" else run_khronos
            send(out, ("ok", run(**kwargs, phase=phase)))
        except BaseException as exc:
            # Anything the engine raises goes back to the parent as a refusal.
            send(out, ("error", f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=3), phase.last))


if __name__ == "__main__":
    serve()
