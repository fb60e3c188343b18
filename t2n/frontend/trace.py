"""Turning a model into a flat TorchScript graph, with parameter names.

``nn.Module``: wrapped so inputs/outputs are flat tensors, put in eval mode and its
call recorded by PyTorch's tracer without autograd, the parameters and buffers as the
graph's last inputs and submodule calls as scopes (no ScriptModule is built); the
eval-mode outputs computed meanwhile are kept as the reference for ``check()``.
``ScriptModule``: its ``forward`` graph is used (hardened first when asked), submodule
calls inlined. Either way each parameter or buffer gets its dotted name, the first one
PyTorch reports when a tensor is shared.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from typing import Any

import attrs
import torch

from t2n.errors import InvalidArgumentError, TraceError
from t2n.frontend.io import FlatModule, Spec, flatten
from t2n.frontend.specialization import Specialization
from t2n.frontend.state_guard import StateWrites
from t2n.frontend.trace_watch import TraceWatch, fast_paths_unwatched

log = logging.getLogger("t2n.frontend")

TracerWarning: type[Warning] = getattr(torch.jit, "TracerWarning")  # noqa: B009 - not in torch's stubs


@attrs.define
class TracedModel:
    """An inlined TorchScript graph and what is needed to lower it."""

    graph: torch._C.Graph
    root: torch.nn.Module
    scope_prefix: str
    example_inputs: list[torch.Tensor]
    input_paths: list[str]
    reference_outputs: list[torch.Tensor]
    output_paths: list[str]
    output_spec: Spec | None
    tensor_names: dict[int, str]
    tracer_warnings: list[str] = attrs.field(factory=list)
    outputs_are_flat: bool = True

    parameter_inputs: list[tuple[str, torch.Tensor]] = attrs.field(factory=list)
    """Parameters and buffers that the graph takes as its last inputs (direct traces),
    with their dotted names."""
    tensor_names_by_ptr: dict[tuple[int, tuple[int, ...], str], str] = attrs.field(factory=dict)
    weights: dict[str, Any] = attrs.field(factory=dict)
    """Parameter name → IR tensor data read from elsewhere (``compile(weights_from=...)``)."""
    specializations: list[Specialization] = attrs.field(factory=list)
    """Places where the trace took a value from the inputs' data."""
    start_values: dict[str, torch.Tensor] = attrs.field(factory=dict)
    """Parameters and buffers the traced call wrote: their values before the call, which
    the artifact starts from (the graph replays the writes)."""
    state_read: dict[str, torch.Tensor] = attrs.field(factory=dict)
    """The model's tensors whose memory the lowered graph holds (filled while lowering)."""

    def name_of(self, t: torch.Tensor, path: str) -> str:
        return self.tensor_names.get(id(t), path)

    def name_of_constant(self, t: torch.Tensor, debug_name: str) -> str | None:
        """The parameter name of a tensor constant (a frozen parameter), if it is one."""
        if t.device.type == "cpu" and t.numel():
            found = self.tensor_names_by_ptr.get(_storage_key(t))
            if found:
                return found
        if debug_name.startswith("self.") and t.numel() > 1:
            return debug_name.removeprefix("self.")
        return None


def _storage_key(t: torch.Tensor) -> tuple[int, tuple[int, ...], str]:
    return (t.data_ptr(), tuple(t.shape), str(t.dtype))


def names_by_storage(module: torch.nn.Module) -> dict[tuple[int, tuple[int, ...], str], str]:
    """(data pointer, shape, dtype) → first dotted name, for every parameter and buffer."""
    out: dict[tuple[int, tuple[int, ...], str], str] = {}
    for n, t in list(module.named_parameters(remove_duplicate=False)) + list(
        module.named_buffers(remove_duplicate=False)
    ):
        if t.device.type == "cpu" and t.numel():
            out.setdefault(_storage_key(t), n)
    return out


@contextlib.contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[None]:
    """Eval mode for the duration, restoring each submodule's training flag after."""
    flags = {m: m.training for m in model.modules()}
    model.eval()
    try:
        yield
    finally:
        for m, f in flags.items():
            m.training = f


def canonical_tensor_names(module: torch.nn.Module, strip: str) -> dict[int, str]:
    """id(tensor) → its first dotted name (shared tensors get one name)."""
    return {id(t): name for name, t in module_state(module, strip)}


class _InferenceCtx:
    """The ``ctx`` an old-style ``autograd.Function.forward`` receives, at inference:
    what it saves for backward is dropped."""

    needs_input_grad: tuple[bool, ...] = ()

    def save_for_backward(self, *tensors: Any) -> None:
        pass

    def mark_dirty(self, *tensors: Any) -> None:
        pass

    def mark_non_differentiable(self, *tensors: Any) -> None:
        pass

    def set_materialize_grads(self, value: bool) -> None:
        pass


@contextlib.contextmanager
def autograd_functions_inlined() -> Iterator[None]:
    """Custom ``torch.autograd.Function``s run their ``forward`` directly while tracing,
    so that the trace records their aten ops instead of an opaque ``prim::PythonOp``
    (their backward is irrelevant at inference)."""
    function = torch.autograd.Function
    original = function.__dict__["apply"]
    base_setup = function.setup_context

    def apply(cls: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(cls, "setup_context", base_setup) is not base_setup:
            return cls.forward(*args, **kwargs)  # new style: forward(*args)
        return cls.forward(_InferenceCtx(), *args, **kwargs)

    function.apply = classmethod(apply)  # type: ignore[assignment, method-assign]
    try:
        yield
    finally:
        function.apply = original  # type: ignore[method-assign]


def module_state(module: torch.nn.Module, strip: str) -> list[tuple[str, torch.Tensor]]:
    """Every parameter and buffer of ``module`` once (a shared tensor under its first
    name, ``strip`` removed), non-persistent buffers included."""
    seen: set[int] = set()
    out: list[tuple[str, torch.Tensor]] = []
    for n, t in list(module.named_parameters(remove_duplicate=False)) + list(
        module.named_buffers(remove_duplicate=False)
    ):
        if id(t) not in seen:
            seen.add(id(t))
            out.append((n.removeprefix(strip), t))
    return out


@contextlib.contextmanager
def _scopes_recorded(root: torch.nn.Module) -> Iterator[None]:
    """Make the tracer record each submodule call as a scope (``__module.model.layers.0``),
    the names ``torch.jit.trace`` gives them, so that errors can name module paths."""
    names: dict[Any, Any] = {"__module": root}
    for name, sub in root.named_modules(remove_duplicate=False):
        if name:
            names.setdefault(sub, "__module." + name)
    trace_mod: Any = torch.jit._trace
    old = trace_mod._trace_module_map
    trace_mod._trace_module_map = names
    try:
        yield
    finally:
        trace_mod._trace_module_map = old


def _direct_trace(
    flat: FlatModule, tensors: list[torch.Tensor], state: list[tuple[str, torch.Tensor]]
) -> torch._C.Graph:
    """Record one call of ``flat`` as a flat TorchScript graph whose inputs are the example
    tensors followed by the parameters and buffers.

    ``torch.jit.trace`` would first build a ScriptModule per submodule and then inline
    their methods: a third of the trace of a 16-layer LLM, for a graph that t2n flattens
    anyway. Recording the call directly gives the same aten nodes and scopes.
    """
    n = len(tensors)

    def call(*flat_inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out: tuple[torch.Tensor, ...] = flat(*flat_inputs[:n])
        return out

    with _scopes_recorded(flat):
        graph, _ = torch._C._create_graph_by_tracing(
            call, [*tensors, *(t for _, t in state)], lambda _v: "", False, False
        )
    return graph


def trace_module(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> TracedModel:
    tensors, paths, spec = flatten((args, kwargs))
    if not tensors:
        raise InvalidArgumentError("the example arguments contain no tensor")
    flat = FlatModule(model, spec)
    outputs: list[torch.Tensor] = []

    def keep_outputs(_m: Any, _i: Any, out: Any) -> None:
        outputs[:] = list(out)

    # tracing runs the model, which may write into its inputs: keep the values it saw
    originals = [t.detach().clone() for t in tensors]
    state = module_state(flat, "model.")
    writes = StateWrites(state)
    watch = TraceWatch(len(tensors), writes, "model.")
    hook = flat.register_forward_hook(keep_outputs)
    caught: list[str] = []
    with eval_mode(model), torch.no_grad(), autograd_functions_inlined(), \
            warnings.catch_warnings(record=True) as wlist:
        warnings.simplefilter("always", TracerWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.showwarning = watch.recorder(wlist, TracerWarning)
        try:
            with watch, fast_paths_unwatched(flat):
                graph = _direct_trace(flat, tensors, state)
        except Exception as exc:
            raise TraceError(f"torch.jit.trace failed on the model: {type(exc).__name__}: {exc}") from exc
        finally:
            hook.remove()
        for w in wlist:
            if issubclass(w.category, TracerWarning):
                caught.append(f"{w.filename}:{w.lineno}: {w.message}")
    graph_state = list(graph.inputs())[len(tensors):]
    start = writes.resolve({name: v for (name, _), v in zip(state, graph_state)})
    torch._C._jit_pass_dce(graph)
    jit_passes: Any = torch._C
    jit_passes._jit_pass_constant_pooling(graph)  # the tracer records a constant per use
    return TracedModel(
        graph=graph,
        root=flat,
        scope_prefix="model.",
        example_inputs=originals,
        input_paths=paths,
        reference_outputs=[o.detach() for o in outputs],
        output_paths=list(flat.out_paths),
        output_spec=flat.out_spec,
        tensor_names=canonical_tensor_names(flat, "model."),
        tracer_warnings=caught,
        parameter_inputs=state,
        specializations=watch.found,
        start_values=start,
    )


def script_graph(
    module: Any,
    args: tuple[Any, ...],
    *,
    harden: bool = True,
    diagnostics: dict[str, Any] | None = None,
) -> TracedModel:
    """The inlined forward graph of a ScriptModule (hardened for ``args`` unless told not
    to) or of an already hardened graph, with reference outputs from running the
    original once."""
    from t2n.frontend.jit.harden import HardenedGraph, harden_jit_for_export

    tensors, paths, _ = flatten((args, {}))
    hardened: HardenedGraph | None
    if isinstance(module, HardenedGraph):
        hardened = module
        original = module.module
        out = hardened(*hardened.example_inputs)
    else:
        original = module
        with torch.no_grad():
            out = module(*args)
        hardened = harden_jit_for_export(module, args, diagnostics=diagnostics) if harden else None
    out_tensors, out_paths, out_spec = flatten(out)
    if hardened is not None:
        graph = hardened.graph.copy()
        root: Any = hardened.module
        tensors = list(hardened.example_inputs)
    else:
        forward: Any = original.forward
        graph = forward.graph.copy()
        root = original
    torch._C._jit_pass_inline(graph)
    torch._C._jit_pass_dce(graph)
    return TracedModel(
        graph=graph,
        root=root,
        scope_prefix="",
        example_inputs=list(tensors),
        input_paths=paths[: len(tensors)] if len(paths) >= len(tensors) else [f"0.{i}" for i in range(len(tensors))],
        reference_outputs=[t.detach() for t in out_tensors],
        output_paths=out_paths,
        output_spec=out_spec,
        tensor_names=canonical_tensor_names(original, ""),
        tensor_names_by_ptr=names_by_storage(original),
        outputs_are_flat=False,
    )
