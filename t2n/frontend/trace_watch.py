"""What the tracer cannot record, watched while it records.

:class:`TraceWatch` is a ``TorchFunctionMode`` (thread-local: other threads running
PyTorch meanwhile are not affected) active during the trace. It sees every torch call
``forward`` makes and acts on these:

* conversions of a tensor to a Python value (``bool``, ``int``, ``.item()``,
  ``.tolist()``, ``torch.tensor(...)`` of tensors): whether the value came from the
  inputs' data (:mod:`t2n.frontend.specialization`); a size of a selection whose length
  comes from the data (``len(torch.nonzero(m))``, ``int(x[mask].shape[0])``) counts as
  taken from the inputs' data (:class:`~t2n.frontend.specialization.DataSizedLength`);
* in-place writes into a parameter's or buffer's memory: the tensor is copied once,
  before the first write, so that the artifact can start from the values PyTorch
  started from (:mod:`t2n.frontend.state_guard`);
* ``.data`` of an input or of a tensor ``forward`` computed: the tracer would store it as
  a constant (its value at the trace, and writes through it lost); it is traced as
  ``detach()``, the same memory, so reads follow the inputs and writes reach the graph;
* with ``compile(sampling="inputs")``, random draws (``torch.randn``...): what each
  returned, under a name given to its traced value (:mod:`t2n.frontend.sampling`).

The tracer's own ``TracerWarning``s come through :meth:`TraceWatch.on_warning`; those
raised inside a call the watch already judged are dropped, the others (conversions
inside torch's own Python functions) are judged by the last op the trace recorded.

PyTorch's attention and transformer layers take their fused fast path only when no
torch-function handler is active; inside them the watch is off
(:func:`fast_paths_unwatched`), so the trace records the same ops as without it.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from t2n.frontend import torch_private
from t2n.frontend.context import module_path
from t2n.frontend.sampling import is_draw
from t2n.frontend.specialization import (
    DataSizedLength,
    InputDependence,
    SizeDependence,
    Specialization,
    user_frame,
)
from t2n.frontend.state_guard import StateWrites
from t2n.frontend.unpool_trace import traced_max_unpool

TENSOR_CONVERSIONS = {
    "__bool__": "a tensor converted to a Python bool (an `if`/`while`/`and`/`or` on tensor data)",
    "item": "a tensor converted to a Python number (`.item()`)",
    "__int__": "a tensor converted to a Python int (`int(tensor)`)",
    "__float__": "a tensor converted to a Python float (`float(tensor)`)",
    "__index__": "a tensor used as a Python index or size",
    "__complex__": "a tensor converted to a Python complex",
    "tolist": "a tensor converted to a Python list (`.tolist()`)",
    "numpy": "a tensor converted to a NumPy array",
    "__array__": "a tensor converted to a NumPy array",
}
TENSOR_FACTORIES = frozenset({"tensor", "as_tensor", "asarray", "new_tensor", "scalar_tensor"})
_QUIET = frozenset({"__format__", "__repr__", "__str__", "__iter__", "__len__", "__reversed__",
                    "__contains__", "__hash__", "__deepcopy__", "__reduce_ex__"})
"""Calls whose conversions are for display or follow sizes only (iterating a tensor
bakes its length, a size): the tracer's warnings inside them are not reported."""
_NOT_WRITES = frozenset({"requires_grad_", "share_memory_", "retain_grad_"})
"""Methods named like in-place ops that leave the tensor's values alone."""
_CONVERSION_WARNINGS = ("Converting a tensor to a Python", "Converting a tensor to a NumPy")
"""The tracer's warnings about a value taken from a tensor (others are about sizes)."""
_IN_PLACE_DUNDERS = frozenset({
    "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__",
    "__ipow__", "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__",
    "__imatmul__", "__setitem__",
})


def _descriptor_name(func: Any) -> str:
    """``data`` for the getter of ``Tensor.data`` (a torch function of its own)."""
    return str(getattr(getattr(func, "__self__", None), "__name__", ""))


def _tensors_in(data: Any) -> Iterator[torch.Tensor]:
    if isinstance(data, torch.Tensor):
        yield data
    elif isinstance(data, (list, tuple)):
        for item in data:
            yield from _tensors_in(item)


def written_tensors(func: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The tensors a call writes into: ``self`` of an in-place method or operator (for
    ``torch.ops`` overloads, the arguments their schema marks as written), or ``out=``."""
    out = kwargs.get("out")
    if isinstance(out, torch.Tensor):
        return [out]
    schema = getattr(func, "_schema", None)
    if schema is not None:
        written = [a for a, arg in zip(args, schema.arguments)
                   if arg.alias_info is not None and arg.alias_info.is_write]
        return list(_tensors_in(written))
    if not args:
        return []
    if name in _IN_PLACE_DUNDERS or (name.endswith("_") and not name.endswith("__") and name not in _NOT_WRITES):
        return list(_tensors_in(args[0]))
    return []


@contextlib.contextmanager
def unwatched() -> Iterator[None]:
    """No torch-function handler runs inside (this thread only)."""
    with torch_private.disable_torch_function():
        yield


FAST_PATH_MODULES: tuple[type[torch.nn.Module], ...] = (
    torch.nn.MultiheadAttention, torch.nn.TransformerEncoderLayer, torch.nn.TransformerEncoder,
)
"""Layers whose fused fast path is skipped while any torch-function handler is active."""


@contextlib.contextmanager
def fast_paths_unwatched(model: torch.nn.Module) -> Iterator[None]:
    """Turn torch-function handling off while ``model``'s fast-path layers run (their
    ``forward`` wrapped on the instance for the duration: hooks would also turn the
    fast path off)."""

    def without_watch(forward: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            with unwatched():
                return forward(*args, **kwargs)

        return call

    wrapped = [m for m in model.modules() if isinstance(m, FAST_PATH_MODULES) and "forward" not in vars(m)]
    for m in wrapped:
        m.forward = without_watch(m.forward)  # type: ignore[method-assign]
    try:
        yield
    finally:
        for m in wrapped:
            del m.forward


class TraceWatch(TorchFunctionMode):
    """Active while ``forward`` is traced: see the module docstring."""

    def __init__(self, n_inputs: int, writes: StateWrites, scope_prefix: str, *, record_draws: bool = False) -> None:
        super().__init__()
        self.record_draws = record_draws
        self.drawn: dict[str, torch.Tensor] = {}
        """Random draws the call made (``record_draws``): the name given to the traced
        value (which the graph keeps when the tracer renumbers its values) → values."""
        self.dependence = InputDependence(n_inputs)
        self.sizes = SizeDependence(n_inputs)
        self.data_sized = DataSizedLength(self.dependence)
        self.writes = writes
        self.scope_prefix = scope_prefix
        self.found: list[Specialization] = []
        self.size_found: list[Specialization] = []
        """Sizes turned into Python values: specialised only where an axis is dynamic."""
        self._judged = 0

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        result = self._watched_call(func, args, kwargs or {})
        if self.record_draws and is_draw(func):
            value = torch_private.traced_value(result)
            if value is not None and isinstance(result, torch.Tensor):
                value.setDebugName(f"t2n_draw_{len(self.drawn)}")
                self.drawn[value.debugName()] = result.detach().clone()
        return result

    def _watched_call(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        unpool = traced_max_unpool(func)
        if unpool is not None:  # PyTorch's own Python for it cannot be traced
            with self._judging():
                return unpool(*args, **kwargs)
        name = getattr(func, "__name__", "")
        if name == "__get__" and _descriptor_name(func) == "data" and args and self._traced_tensor(args[0]):
            return args[0].detach()  # the same memory, and a traced alias instead of a constant
        what = TENSOR_CONVERSIONS.get(name)
        if what is not None and args and isinstance(args[0], torch.Tensor):
            from_inputs = self.dependence.of_tensor(args[0]) or self.data_sized.reads_length(args[0])
            sizes = frozenset() if from_inputs else self.sizes.of_tensor(args[0])
            with self._judging():
                result = func(*args, **kwargs)
            if from_inputs or sizes:
                value = repr(result) if isinstance(result, (bool, int, float)) else ""
                self.note(what, value, sizes)
            return result
        if name in TENSOR_FACTORIES and any(self.dependence.of_tensor(t) for t in _tensors_in(args[:1])):
            self.note(f"`torch.{name}(...)` built from tensor values (stored as a constant)")
        if name in _QUIET or name in TENSOR_FACTORIES:
            with self._judging():
                return func(*args, **kwargs)
        targets = written_tensors(func, name, args, kwargs)
        if not targets:
            return func(*args, **kwargs)
        events = [e for t in targets for e in self.writes.before_write(t, name, self)]
        result = func(*args, **kwargs)
        if events:
            self.writes.after_write(events)
            if not all(e.tracked for e in events):
                self.writes.input_writes(self, events, [*args[1:], *kwargs.values()])
        return result

    @contextlib.contextmanager
    def _judging(self) -> Iterator[None]:
        self._judged += 1
        try:
            yield
        finally:
            self._judged -= 1

    def current_module(self) -> str:
        """The dotted path of the submodule whose forward is being traced."""
        state = torch_private.tracing_state()
        return module_path(state.current_scope(), self.scope_prefix) if state is not None else ""

    def note(self, what: str, value: str = "", sizes: frozenset[tuple[int, int | None]] = frozenset()) -> None:
        """Record a place: from the inputs' data, or (``sizes``) from their sizes."""
        place = self._place(what, sys._getframe(1), value, sizes)
        (self.size_found if sizes else self.found).append(place)

    def _place(self, what: str, frame: Any, value: str = "",
               sizes: frozenset[tuple[int, int | None]] = frozenset()) -> Specialization:
        """``what`` at the model's source line on the stack from ``frame``, in the module traced."""
        user = user_frame(frame)
        return Specialization(what, user.f_code.co_filename if user else "", user.f_lineno if user else 0,
                              self.current_module(), value, sizes)

    def _traced_tensor(self, t: Any) -> bool:
        """Whether ``t`` is an input of the traced call or a tensor it computed (not a
        parameter, buffer or constant: ``.data`` of those reads their value)."""
        value = torch_private.traced_value(t)
        if value is None:
            return False
        kind = value.node().kind()
        if kind == "prim::Param":  # the call's inputs come first, then its parameters and buffers
            return value.offset() < self.dependence.n_inputs
        return kind not in ("prim::TracedAttr", "prim::GetAttr", "prim::Constant")

    def recorder(self, into: list[warnings.WarningMessage], tracer_warning: type[Warning]) -> Any:
        """A ``warnings.showwarning`` that keeps each warning in ``into`` and judges the
        tracer's (while the stack that raised it is still there)."""

        def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: Any = None, line: str | None = None) -> None:
            frame = user_frame(sys._getframe(1))  # the model's line, not this module's
            if frame is not None:
                filename, lineno = frame.f_code.co_filename, frame.f_lineno
            into.append(warnings.WarningMessage(message, category, filename, lineno, file, line))
            if issubclass(category, tracer_warning):
                self.on_warning(message)

        return show

    def on_warning(self, message: Warning | str) -> None:
        """A ``TracerWarning``: judged here unless raised inside a call already judged."""
        text = str(message)
        if self._judged or not text.startswith(_CONVERSION_WARNINGS):
            return  # judged already, or about sizes (iterating a tensor bakes its length)
        state = torch_private.tracing_state()
        if state is None:
            return
        last = state.graph().insertPoint().prev()  # the last op recorded, in the current module
        outs = list(last.outputs()) if last.kind() != "prim::Param" else []
        sizes = frozenset() if not outs or self.dependence(outs[0]) else self.sizes(outs[0])
        if outs and (sizes or self.dependence(outs[0])):
            text = text.split(" might ")[0].split(". ")[0]
            self.note(f"{text[0].lower() + text[1:] if text else 'a value'} (reported by the tracer)", "", sizes)


__all__ = ["FAST_PATH_MODULES", "TraceWatch", "fast_paths_unwatched", "unwatched", "written_tensors"]
