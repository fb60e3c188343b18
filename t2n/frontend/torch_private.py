"""The private PyTorch APIs the tracing frontend relies on, in one place.

The tracer entry point, its per-thread state and value map, and the TorchScript graph
passes are not public API: they can change between PyTorch releases. Every use in t2n
goes through this module, which checks at import that the installed torch is in the
range t2n is known to work with, and says so in a typed error otherwise.

Supported: torch 2.13.x, the release the test suite runs on (pyproject declares the
same range; an untested release is not declared).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import torch

from t2n.errors import UnsupportedTorchError

SUPPORTED_RANGE = ((2, 13), (2, 13))
"""Oldest and newest (major, minor) torch releases t2n accepts: those the tests run on."""

_C: Any = torch._C  # most of the tracer's bindings are not in torch's stubs


def torch_version(text: str) -> tuple[int, int]:
    """``"2.13.0+cpu"`` → ``(2, 13)``."""
    match = re.match(r"(\d+)\.(\d+)", text)
    if match is None:
        raise UnsupportedTorchError(f"cannot read the torch version {text!r}; t2n supports torch "
                                    f"{_range_text()}")
    return int(match.group(1)), int(match.group(2))


def _range_text() -> str:
    (a, b), (c, d) = SUPPORTED_RANGE
    return f"{a}.{b}.x" if (a, b) == (c, d) else f"{a}.{b} to {c}.{d}.x"


def check_torch_version(text: str) -> None:
    """Refuse a torch release outside :data:`SUPPORTED_RANGE` (its private tracer APIs
    may differ from the ones this module calls)."""
    version = torch_version(text)
    low, high = SUPPORTED_RANGE
    if not low <= version <= high:
        raise UnsupportedTorchError(
            f"torch {text} is not supported by t2n's tracing frontend, which uses private "
            f"PyTorch APIs known to work with torch {_range_text()} (the releases its tests run on); install "
            "a torch in that range"
        )


check_torch_version(torch.__version__)


# -- tracing ------------------------------------------------------------------------

def trace_graph(fn: Callable[..., Any], inputs: Sequence[torch.Tensor]) -> torch._C.Graph:
    """Record one call of ``fn`` on ``inputs`` as a flat TorchScript graph (no ScriptModule
    is built); the inputs become the graph's inputs in order."""
    graph, _ = _C._create_graph_by_tracing(fn, list(inputs), lambda _v: "", False, False)
    return graph  # type: ignore[no-any-return]


def tracing_state() -> Any:
    """The tracer's state of the current thread (``None`` when it is not tracing)."""
    return _C._get_tracing_state()


def set_tracing_state(state: Any) -> None:
    _C._set_tracing_state(state)


def value_trace(t: torch.Tensor) -> torch._C.Value:
    """The graph value the tracer holds for ``t`` (a constant is recorded if none)."""
    return _C._get_value_trace(t)  # type: ignore[no-any-return]


def traced_value(t: object) -> torch._C.Value | None:
    """The tracer's value for ``t`` while tracing, or ``None`` (not a tensor, not
    tracing, or a tensor the tracer cannot record)."""
    if not isinstance(t, torch.Tensor) or tracing_state() is None:
        return None
    try:
        return value_trace(t)
    except RuntimeError:
        return None


def python_op_function(node: torch._C.Node) -> Any:
    """What a ``prim::PythonOp`` calls (a custom ``autograd.Function``'s bound ``apply``)."""
    return _node(node).pyobj()


def python_op_constants(node: torch._C.Node) -> list[Any]:
    """The non-tensor arguments of a ``prim::PythonOp``, in order."""
    return list(_node(node).scalar_args())


def python_op_name(node: torch._C.Node) -> str:
    return str(_node(node).pyname())


def _node(node: torch._C.Node) -> Any:
    return node


# -- graph passes and functions ------------------------------------------------------

def dead_code_elimination(graph: torch._C.Graph) -> None:
    _C._jit_pass_dce(graph)


def constant_pooling(graph: torch._C.Graph) -> None:
    _C._jit_pass_constant_pooling(graph)


def inline_calls(graph: torch._C.Graph) -> None:
    _C._jit_pass_inline(graph)


def lint(graph: torch._C.Graph) -> None:
    _C._jit_pass_lint(graph)


def function_from_graph(name: str, graph: torch._C.Graph) -> Any:
    return _C._create_function_from_graph(name, graph)


def interpret_graph(graph: torch._C.Graph, inputs: Sequence[torch.Tensor]) -> Any:
    """Run ``graph`` once in TorchScript's interpreter, without its optimizing executor."""
    return _C._jit_interpret_graph(graph, tuple(inputs))


def all_schemas() -> list[Any]:
    return list(_C._jit_get_all_schemas())


def max_unpool(x: torch.Tensor, indices: torch.Tensor, size: list[Any], stride: list[int],
               padding: list[int]) -> torch.Tensor:
    """ATen's ``max_unpool2d``/``3d`` through its Python binding, which the tracer records
    with the traced sizes (``torch.ops.aten`` would bake them as constants)."""
    if len(size) == 2:
        return _C._nn.max_unpool2d(x, indices, size)  # type: ignore[no-any-return]
    return _C._nn.max_unpool3d(x, indices, size, stride, padding)  # type: ignore[no-any-return]


def disable_torch_function() -> Any:
    """A context in which no ``__torch_function__`` handler runs (this thread only)."""
    return _C.DisableTorchFunction()


__all__ = [
    "SUPPORTED_RANGE", "all_schemas", "check_torch_version", "constant_pooling", "dead_code_elimination",
    "disable_torch_function", "function_from_graph", "inline_calls", "interpret_graph", "lint", "python_op_constants", "python_op_function", "python_op_name", "set_tracing_state",
    "torch_version", "trace_graph", "tracing_state", "value_trace",
]
