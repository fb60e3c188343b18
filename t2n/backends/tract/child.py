"""Runs artifacts in whichever tract wheel the interpreter running it has installed.

This file is executed as a script by another Python (a virtual environment holding an
older tract), so it imports nothing of t2n: only numpy, tract and the standard library.
It works with the Python APIs of tract 0.19 to 0.23 (``model_for_path`` /
``concretize_symbols`` / ``into_optimized`` before 0.22.1, ``load`` / ``SetSymbols`` after).

Usage: ``python child.py JOBS.json``. JOBS.json is a list of runs, each
``{"path", "inputs" (.npz), "outputs" (.npz to write), "registries", "symbols"}``.
For every run it prints JSON lines on stdout: ``{"run": i, "phase": step}`` before each
step, then ``{"run": i, "ok": true}`` or ``{"run": i, "ok": false, "error": text}``.
When tract aborts the process, the last phase line says where.
"""

from __future__ import annotations

import json
import sys
from typing import Any

REGISTRY_METHODS = {
    "tract_core": "with_tract_core",
    "tract_transformers": "with_tract_transformers",
    "tract_extra": "with_tract_extra",
    "tract_pulse": "with_pulse",
    "pulse": "with_pulse",
    "tract_onnx": "with_onnx",
}


def _say(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def nnef_loader(tract: Any, registries: list[str]) -> Any:
    loader = tract.nnef()
    wanted = ["tract_core", *registries]
    for name in dict.fromkeys(wanted):
        method = getattr(loader, REGISTRY_METHODS.get(name, ""), None)
        if method is not None:  # tract_core is built in (no method) from 0.22 on
            loader = method()
    return loader


DATUM_KINDS = {0x10: "u", 0x20: "i", 0x30: "f"}
"""tract datum type codes: 0x01 is bool, else kind (high nibble) and byte size (low)."""


def numpy_of(tract: Any, np: Any, value: Any) -> Any:
    """The output as numpy. Before 0.23 the binding's ``Value.to_numpy`` reads every
    tensor as f32 whatever its type (f16, bool and integer outputs come back as
    garbage), so the bytes are read here with their datum type."""
    lib: Any = getattr(tract, "lib", None)
    if type(value).__name__ != "Value" or not hasattr(lib, "tract_value_as_bytes"):
        return value.to_numpy()
    import ctypes

    code, rank = ctypes.c_uint32(0), ctypes.c_size_t(0)
    shape, data = ctypes.POINTER(ctypes.c_size_t)(), ctypes.c_void_p()
    tract.check(lib.tract_value_as_bytes(value.ptr, ctypes.byref(code), ctypes.byref(rank),
                                         ctypes.byref(shape), ctypes.byref(data)))
    dims = [int(shape[i]) for i in range(rank.value)]
    kind = DATUM_KINDS.get(code.value & 0xF0)
    dtype = np.dtype(bool) if code.value == 0x01 else np.dtype(f"{kind}{code.value & 0x0F}") if kind else None
    if dtype is None:
        raise TypeError(f"tract returned a tensor of datum type {code.value:#x}, which has no numpy type")
    count = int(np.prod(dims)) if dims else 1
    raw = ctypes.string_at(data, count * dtype.itemsize) if count else b""
    return np.frombuffer(raw, dtype=dtype).reshape(dims).copy()


def has_symbols(model: Any) -> bool:
    """Whether an input's size is symbolic (its fact reads like ``1,S,I64``)."""
    for i in range(model.input_count()):
        dims = model.input_fact(i).dump().split(",")[:-1]
        if any(not d.strip().isdigit() for d in dims):
            return True
    return False


def tract_value_of(tract: Any, np: Any, x: Any) -> Any:
    """An input for the binding. Before 0.23 it turns a 0-d array into a 1-d one
    (``ascontiguousarray``), which the model refuses: scalars are passed by hand."""
    lib: Any = getattr(tract, "lib", None)
    if x.ndim != 0 or not hasattr(tract, "Value") or not hasattr(lib, "tract_value_from_bytes"):
        return x
    import ctypes

    from tract.value import dt_numpy_to_tract

    ptr = ctypes.c_void_p()
    data = np.ascontiguousarray(x.reshape(1))
    tract.check(lib.tract_value_from_bytes(dt_numpy_to_tract(x.dtype), ctypes.c_size_t(0),
                                           (ctypes.c_size_t * 1)(), ctypes.c_void_p(data.ctypes.data),
                                           ctypes.byref(ptr)))
    return tract.Value(ptr)


def run_one(tract: Any, np: Any, index: int, job: dict[str, Any]) -> None:
    _say(run=index, phase="loading")
    loader = nnef_loader(tract, list(job.get("registries") or []))
    path = job["path"]
    model = loader.load(path) if hasattr(loader, "load") else loader.model_for_path(path)
    with np.load(job["inputs"]) as data:
        inputs = [np.require(data[f"input_{i}"], requirements="C") for i in range(len(data.files))]
    if model.input_count() != len(inputs):
        # tract's Python binding crashes when given fewer inputs than the model has.
        raise ValueError(f"the model has {model.input_count()} inputs but {len(inputs)} were given")
    symbols = dict(job.get("symbols") or {})
    optimize = True
    if hasattr(tract, "SetSymbols"):
        if symbols:
            model.transform(tract.SetSymbols(symbols))
    elif has_symbols(model):
        # tract before 0.23 optimizes some graphs with symbolic sizes into wrong numbers
        # (a LLaMA MLP over a symbolic length), and setting the symbols first breaks
        # others (they stay in dyn_slice lengths and reshapes). Such graphs run as loaded,
        # their sizes given by the inputs.
        optimize = False
    elif symbols:
        model.concretize_symbols(symbols)
    _say(run=index, phase="optimizing")
    if optimize and hasattr(model, "into_optimized") and not hasattr(tract, "SetSymbols"):
        model = model.into_optimized()
    runnable = model.into_runnable()
    _say(run=index, phase="running")
    outputs = runnable.run([tract_value_of(tract, np, x) for x in inputs])
    np.savez(job["outputs"], **{f"output_{i}": numpy_of(tract, np, o) for i, o in enumerate(outputs)})


def main(argv: list[str]) -> int:
    with open(argv[1]) as f:
        jobs = json.load(f)
    start = int(argv[2]) if len(argv) > 2 else 0
    _say(run=start, phase="starting")
    import numpy as np
    import tract

    version = tract.version() if callable(getattr(tract, "version", None)) else "?"
    _say(run=start, phase="starting", tract=str(version))
    for index in range(start, len(jobs)):
        try:
            run_one(tract, np, index, jobs[index])
        except Exception as exc:  # the engine's refusal goes back to the parent as text
            _say(run=index, ok=False, error=f"{type(exc).__name__}: {exc}")
            continue
        _say(run=index, ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
