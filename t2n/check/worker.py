"""Code that runs inside the engine child process (imports only numpy and the engine).

Kept free of t2n imports beyond this module so the child starts fast and a crash
in the engine takes down only the child.
"""

from __future__ import annotations

import os
import traceback
from typing import Any

import numpy as np

from t2n.check.protocol import recv, send


def run_tract(path: str, inputs: list[np.ndarray], registries: list[str],
              symbols: dict[str, int] | None) -> dict[str, Any]:
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
    runnable = model.into_runnable()
    outs = runnable.run([np.require(x, requirements="C") for x in inputs])
    return {"outputs": [o.to_numpy() for o in outs], "input_facts": facts, "output_facts": out_facts}


def run_khronos(path: str, inputs: list[np.ndarray]) -> dict[str, Any]:
    import re

    import nnef
    from nnef_tools.interpreter.pytorch import Interpreter

    with open(os.path.join(path, "graph.nnef")) as f:
        text = f.read()
    # Fragments the document defines are expanded into standard operations.
    own = sorted(set(re.findall(r"^\s*fragment\s+(\w+)", text, flags=re.M)))
    graph = nnef.load_graph(path, lowered=own)
    nnef.infer_shapes(graph)
    interp = Interpreter(path, device="cpu", decomposed=own)
    outs = interp([np.asarray(x) for x in inputs])
    return {"outputs": [outs[name] for name in graph.outputs], "input_facts": [], "output_facts": []}


def serve() -> None:
    """Answer requests on stdin until EOF: ("tract"|"khronos", kwargs) → ("ok"|"error", …).

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
        try:
            result = run_tract(**kwargs) if kind == "tract" else run_khronos(**kwargs)
            send(out, ("ok", result))
        except BaseException as exc:
            send(out, ("error", f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=3)))


if __name__ == "__main__":
    serve()
