"""Tracing a model whose parameters live on the meta device (built without its weights,
which ``compile(..., weights_from=...)`` reads from disk when the artifact is written).

PyTorch's tracer cannot run such a model on meta tensors: the tensors the forward pass
creates (caches, masks, position tables) are data-less meta constants that the graph
would have to hold, and the tracer's constant pooling compares them. So each meta
parameter or buffer is swapped, for the duration of the trace only, for a stand-in that
costs no memory: zeros in lazily mapped memory, which reads never make resident. The
graph reads parameters as inputs, so their values never reach it, and every constant
the forward pass builds from its own code (or from real buffers) is exact.

The one way a stand-in's value could leak into the artifact is the forward pass
*reading* it in Python (``.item()``, ``if w.sum() > 0:``, ``torch.tensor(w)``): that
would bake the stand-in's zero where the real weight's value belongs. Such reads are
watched and refused with a :class:`~t2n.errors.TraceError` naming the tensor and the
source line, instead of silently exporting a different model.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_map

from t2n.errors import TraceError
from t2n.frontend import torch_private
from t2n.frontend.extractors import ExtractedCalls
from t2n.frontend.io import flatten
from t2n.frontend.specialization import data_inputs, user_frame
from t2n.frontend.trace import TracedModel, trace_module
from t2n.frontend.trace_watch import TENSOR_CONVERSIONS, TENSOR_FACTORIES
from t2n.frontend.value_walk import ValueWalk


def _stand_in(t: torch.Tensor) -> torch.Tensor:
    """Zeros of ``t``'s shape and dtype in memory the kernel maps lazily (``calloc``):
    reading it maps the shared zero page, so even the kernels that copy a weight (a
    linear layer's matmul) add nothing to the resident memory; each stand-in has its own
    storage (no two share a data pointer)."""
    raw = torch.from_numpy(np.zeros(t.numel() * t.element_size(), np.uint8))
    value = raw.view(t.dtype).reshape(t.shape)
    if isinstance(t, torch.nn.Parameter):
        return torch.nn.Parameter(value, requires_grad=False)
    return value


@contextlib.contextmanager
def stand_ins(model: torch.nn.Module) -> Iterator[dict[int, tuple[str, torch.Tensor]]]:
    """Swap every meta parameter and buffer of ``model`` for a stand-in until the block
    ends (a tensor shared by several modules gets one stand-in: ties are kept). Yields
    ``id(stand-in)`` → (dotted name, stand-in)."""
    made: dict[int, torch.Tensor] = {}
    named: dict[int, tuple[str, torch.Tensor]] = {}
    swapped: list[tuple[dict[str, Any], str, torch.Tensor]] = []
    for path, module in model.named_modules(remove_duplicate=False):
        for store in (module._parameters, module._buffers):
            for name, t in list(store.items()):
                if t is None or not t.is_meta:
                    continue
                if id(t) not in made:
                    made[id(t)] = _stand_in(t)
                    named[id(made[id(t)])] = (f"{path}.{name}" if path else name, made[id(t)])
                swapped.append((store, name, t))
                store[name] = made[id(t)]
    try:
        yield named
    finally:
        for store, name, t in swapped:
            store[name] = t


class StandInReads(TorchFunctionMode):
    """Active during the trace: notes each Python read of a stand-in's value (or of a
    value computed from one), with the tensor's name and the model's source line."""

    def __init__(self, named: dict[int, tuple[str, torch.Tensor]]) -> None:
        super().__init__()
        self.named = named
        self.found: list[str] = []
        self._params: dict[int, str] | None = None

    def _param_names(self) -> dict[int, str]:
        """Graph input (unique id) → stand-in name, looked up once the trace has begun."""
        if self._params is None:
            self._params = {}
            for name, t in self.named.values():
                with contextlib.suppress(RuntimeError):
                    self._params[torch_private.value_trace(t).unique()] = name
        return self._params

    def read_from(self, t: object) -> str | None:
        """The name of a stand-in whose data ``t`` is computed from, if any."""
        value = torch_private.traced_value(t)
        return None if value is None else _stand_in_source(value, self._param_names())

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        name = getattr(func, "__name__", "")
        if (name in TENSOR_CONVERSIONS or name in TENSOR_FACTORIES) and args:
            source = self.read_from(args[0]) if isinstance(args[0], torch.Tensor) else next(
                (s for s in map(self.read_from, _tensors_of(args[0])) if s), None)
            if source is not None:
                frame = user_frame(sys._getframe())
                where = f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame else "forward"
                self.found.append(f"{where}: `{name}` reads the value of '{source}'")
        return func(*args, **(kwargs or {}))


def _tensors_of(data: Any) -> list[torch.Tensor]:
    if isinstance(data, torch.Tensor):
        return [data]
    if isinstance(data, (list, tuple)):
        return [t for item in data for t in _tensors_of(item)]
    return []


def _stand_in_source(value: torch._C.Value, params: dict[int, str]) -> str | None:
    """Walk the traced graph back from ``value``: the stand-in it reads data from."""
    walk = ValueWalk(value)
    for v in walk:
        if v.unique() in params:
            return params[v.unique()]
        if v.node().kind() != "prim::Param":
            walk.push(data_inputs(v))
    return None


def _real_input(x: Any) -> Any:
    """Meta example inputs become zeros of their shape (inputs are small; a forward pass
    needs their values only to run)."""
    if isinstance(x, torch.Tensor) and x.is_meta:
        return torch.zeros(x.shape, dtype=x.dtype)
    return x


def trace_meta_module(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                      extracted: ExtractedCalls | None = None) -> TracedModel:
    """Trace ``model`` with stand-ins for its meta tensors; the traced model refers to the
    model's own (meta) tensors again afterwards, and has no reference outputs (PyTorch
    never computed with the real weights). Raises :class:`TraceError` when the forward
    pass reads a stand-in's value."""
    from t2n.frontend.trace import canonical_tensor_names, module_state

    with stand_ins(model) as named:
        watch = StandInReads(named)
        with watch:
            traced = trace_module(model, tree_map(_real_input, args), tree_map(_real_input, kwargs),
                                  extracted)
    if watch.found:
        listing = "\n".join(f"  - {f}" for f in watch.found[:20])
        raise TraceError(
            f"the model is on the meta device (its weights are read from weights_from when "
            f"written), but its forward pass reads weight values in Python, which the "
            f"artifact would bake in as constants:\n{listing}\nWhat to do: load these "
            "weights into the model before compiling (e.g. model.load_state_dict(..., "
            "assign=True)), or compute with them as tensors instead of Python values.")
    # the graph's state inputs are the model's own tensors again (names, Q4_0 scales)
    traced.parameter_inputs = module_state(traced.root, "model.")
    traced.tensor_names = canonical_tensor_names(traced.root, "model.")
    traced.example_inputs = flatten((args, kwargs))[0]
    traced.reference_outputs = []
    return traced
