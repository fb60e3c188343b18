"""Turning a model into a flat TorchScript graph, with parameter names.

``nn.Module``: wrapped so inputs/outputs are flat tensors, put in eval mode (a model
in training mode gives a :class:`TrainingModeWarning`; its flags are restored after) and its
call recorded by PyTorch's tracer without autograd, the parameters and buffers as the
graph's last inputs and submodule calls as scopes (no ScriptModule is built); the
eval-mode outputs computed meanwhile are kept as the reference for ``check()``.
``ScriptModule``: run and hardened in eval mode too; its ``forward`` graph is used, submodule
calls inlined. Either way each parameter or buffer gets its dotted name, the first one
PyTorch reports when a tensor is shared.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import warnings
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import torch

from t2n.errors import ExtractorError, InvalidArgumentError, TraceError
from t2n.frontend import torch_private
from t2n.frontend.extractors import ExtractedCalls
from t2n.frontend.io import FlatModule, Spec, flatten
from t2n.frontend.jit.module_calls import inline_autograd_functions, module_calls_recorded
from t2n.frontend.jit.quantized_trace import (
    holds_packed_params,
    jit_trace_flat,
    mark_quantized_forms,
)
from t2n.frontend.sampling import NoiseDraw, script_draws
from t2n.frontend.specialization import Specialization
from t2n.frontend.state_guard import StateWrites
from t2n.frontend.trace_replay import ReplayDifference, replay_differences, replay_inputs
from t2n.frontend.trace_watch import TraceWatch, fast_paths_unwatched

if TYPE_CHECKING:
    from t2n.frontend.jit.harden import HardenedGraph

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
    size_specializations: list[Specialization] = attrs.field(factory=list)
    """Places where the trace turned a size of the inputs into a Python value (baked
    where that axis is dynamic)."""
    start_values: dict[str, torch.Tensor] = attrs.field(factory=dict)
    """Parameters and buffers the traced call wrote: their values before the call, which
    the artifact starts from (the graph replays the writes)."""
    state_read: dict[str, torch.Tensor] = attrs.field(factory=dict)
    """The model's tensors whose memory the lowered graph holds (filled while lowering)."""
    state_written: tuple[str, ...] = ()
    """Parameters and buffers the traced call wrote, seen by the trace or not (through
    ``.data``: their version counter did not move), by dotted name."""
    untraced: list[ReplayDifference] = attrs.field(factory=list)
    """Outputs the traced graph, replayed on the example inputs, computes differently
    from ``forward`` (:mod:`t2n.frontend.trace_replay`)."""
    extracted: ExtractedCalls | None = None
    """The module extractors of the compile call and the calls they claimed."""
    noise: list[NoiseDraw] = attrs.field(factory=list)
    """Random draws made graph inputs (``compile(sampling="inputs")``), in graph order;
    their values end ``example_inputs``."""

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
def eval_mode(model: torch.nn.Module, *, note: bool = True) -> Iterator[None]:
    """Eval mode for the duration, restoring each submodule's training flag after; a
    model found in training mode gives a :class:`TrainingModeWarning` (``note``)."""
    flags = {m: m.training for m in model.modules()}
    if note:
        note_training_mode(model, flags)
    model.eval()
    try:
        yield
    finally:
        for m, f in flags.items():
            m.training = f


class TrainingModeWarning(UserWarning):
    """The model was in training mode: it is exported as in eval mode (what an inference
    artifact computes), its training flags restored after."""


def note_training_mode(model: torch.nn.Module, flags: dict[torch.nn.Module, bool]) -> None:
    """Warn, naming them, when submodules that compute differently in training (dropout,
    batch norm, instance norm with running statistics, RNNs and attention with dropout)
    are in training mode: the trace puts them in eval mode."""
    named = [n for n, m in model.named_modules() if flags.get(m) and _differs_in_training(m)]
    if not named:
        return  # nothing that computes differently in training (a bare nn.Linear is born training)
    shown = ", ".join(repr(n or "(the model)") for n in named[:5]) + (f" and {len(named) - 5} more"
                                                                    if len(named) > 5 else "")
    warnings.warn(
        f"the model is in training mode ({shown}, which compute differently in training): "
        "it is exported as in eval mode (dropout off, batch norm on its running statistics), as an "
        "inference artifact computes, and its training flags are restored after. Call model.eval() "
        "before exporting to say so.", TrainingModeWarning, stacklevel=4)


_TRAINING_KINDS = ("Dropout", "AlphaDropout", "FeatureAlphaDropout", "BatchNorm", "SyncBatchNorm",
                   "LazyBatchNorm")
"""Class names (a prefix) of the modules that compute differently in training."""


def _differs_in_training(m: torch.nn.Module) -> bool:
    name = str(getattr(m, "original_name", "")) if isinstance(m, torch.jit.ScriptModule) else type(m).__name__
    if name.startswith(_TRAINING_KINDS) or (isinstance(m, torch.nn.Module) and _is_training_kind(m)):
        return True
    if "InstanceNorm" in name:
        return bool(getattr(m, "track_running_stats", False))
    dropout = getattr(m, "dropout", 0.0)  # RNNs, attention: their own dropout
    return isinstance(dropout, float) and dropout > 0


def _is_training_kind(m: torch.nn.Module) -> bool:
    from torch.nn.modules.batchnorm import _BatchNorm
    from torch.nn.modules.dropout import _DropoutNd

    return isinstance(m, (_BatchNorm, _DropoutNd))


def canonical_tensor_names(module: torch.nn.Module, strip: str) -> dict[int, str]:
    """id(tensor) → its first dotted name (shared tensors get one name)."""
    return {id(t): name for name, t in module_state(module, strip)}


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

    return torch_private.trace_graph(call, [*tensors, *(t for _, t in state)])


_TRACE_LOCK = threading.RLock()
"""Held while a model is traced: the warnings module's filters and ``showwarning`` that
the trace sets are the process's, so two traces at once (two ``compile`` calls in two
threads) take turns instead of restoring each other's."""


@contextlib.contextmanager
def _tracer_warnings_recorded(watch: TraceWatch, caught: list[str]) -> Iterator[None]:
    """Record the warnings this thread raises while tracing (the tracer's are judged by
    ``watch`` and listed in ``caught``); other threads' warnings are shown as usual."""
    thread = threading.get_ident()
    others = warnings.showwarning
    wlist: list[warnings.WarningMessage] = []
    with warnings.catch_warnings():
        warnings.simplefilter("always", TracerWarning)
        ours = watch.recorder(wlist, TracerWarning)

        def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: Any = None, line: str | None = None) -> None:
            if threading.get_ident() == thread:
                ours(message, category, filename, lineno, file, line)
            else:
                others(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield
        for w in wlist:
            if issubclass(w.category, TracerWarning):
                caught.append(f"{w.filename}:{w.lineno}: {w.message}")


def trace_module(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                 extracted: ExtractedCalls | None = None, *, draws: bool = False) -> TracedModel:
    """Trace one call of ``model``; instances claimed by ``extracted`` are recorded as one
    node each. ``draws``: keep the random draws of the call as graph inputs
    (``compile(sampling="inputs")``), their values appended to the example inputs."""
    tensors, paths, spec = flatten((args, kwargs))
    if not tensors:
        raise InvalidArgumentError("the example arguments contain no tensor")
    if holds_packed_params(model):
        if extracted is not None and extracted.extractors:
            raise InvalidArgumentError(
                "module extractors are not supported on models quantized with "
                "torch.ao.quantization (their packed weights are traced by torch.jit.trace); "
                "export without extractors=")
        return trace_quantized_module(model, args, kwargs)
    flat = FlatModule(model, spec)
    # tracing runs the model, which may write into its inputs: keep the values it saw
    originals = [t.detach().clone() for t in tensors]
    state = module_state(flat, "model.")
    writes = StateWrites(state)
    watch = TraceWatch(len(tensors), writes, "model.", record_draws=draws)
    graph, outputs, caught = _watched_trace(model, flat, tensors, state, watch, extracted)
    graph_state = list(graph.inputs())[len(tensors):]
    start = writes.resolve({name: v for (name, _), v in zip(state, graph_state)})
    _tidy_traced_graph(graph, extracted)
    noise = script_draws(graph, watch.drawn, "model.") if draws else []
    return TracedModel(
        graph=graph,
        root=flat,
        scope_prefix="model.",
        example_inputs=originals + [d.values for d in noise],
        noise=noise,
        input_paths=paths,
        reference_outputs=[o.detach() for o in outputs],
        output_paths=list(flat.out_paths),
        output_spec=flat.out_spec,
        tensor_names=canonical_tensor_names(flat, "model."),
        tracer_warnings=caught,
        parameter_inputs=state,
        specializations=watch.found,
        size_specializations=watch.size_found,
        start_values=start,
        state_written=tuple(dict.fromkeys(e.name for e in writes.events)), extracted=extracted,
        untraced=_untraced(graph, extracted, writes, replay_inputs(originals, state, start), outputs, flat.out_paths),
    )


def _untraced(graph: torch._C.Graph, extracted: ExtractedCalls | None, writes: StateWrites,
              inputs: list[torch.Tensor], outputs: list[torch.Tensor], names: list[str]) -> list[ReplayDifference]:
    """What the replay of the trace finds (:mod:`t2n.frontend.trace_replay`), where it can
    compare: not with calls taken by extractors (one node each), nor with state a kernel
    changed without its version counter (exported at its value after the call)."""
    if (extracted is not None and extracted.calls) or writes.silent:
        return []
    return replay_differences(graph, inputs, outputs, names)


def _watched_trace(
    model: torch.nn.Module, flat: FlatModule, tensors: list[torch.Tensor],
    state: list[tuple[str, torch.Tensor]], watch: TraceWatch, extracted: ExtractedCalls | None,
) -> tuple[torch._C.Graph, list[torch.Tensor], list[str]]:
    """One traced call of ``flat`` in eval mode, under the trace lock, with ``watch``
    noting specializations and writes: the graph, the outputs the call returned and the
    tracer's warnings. A failure other than an extractor's is one :class:`TraceError`."""
    outputs: list[torch.Tensor] = []

    def keep_outputs(_m: Any, _i: Any, out: Any) -> None:
        outputs[:] = list(out)

    hook = flat.register_forward_hook(keep_outputs)
    caught: list[str] = []
    with _TRACE_LOCK, eval_mode(model), torch.no_grad(), _tracer_warnings_recorded(watch, caught):
        try:
            with watch, fast_paths_unwatched(flat), module_calls_recorded(flat, extracted):
                graph = _direct_trace(flat, tensors, state)
        except ExtractorError:
            raise
        except Exception as exc:
            raise TraceError(f"torch.jit.trace failed on the model: {type(exc).__name__}: {exc}") from exc
        finally:
            hook.remove()
    return graph, outputs, caught


def _tidy_traced_graph(graph: torch._C.Graph, extracted: ExtractedCalls | None) -> None:
    """Autograd functions inlined, dead code dropped, constants pooled (the tracer records
    one per use) and float ops PyTorch ran on quantized tensors marked."""
    inline_autograd_functions(graph, extracted)
    torch_private.dead_code_elimination(graph)
    torch_private.constant_pooling(graph)
    mark_quantized_forms(graph)


def trace_quantized_module(model: torch.nn.Module, args: tuple[Any, ...],
                           kwargs: dict[str, Any]) -> TracedModel:
    """A model quantized with ``torch.ao.quantization``, traced by ``torch.jit.trace`` (its
    packed weights are read through ``prim::GetAttr``; see ``quantized_trace``)."""
    originals = [t.detach().clone() for t in flatten((args, kwargs))[0]]
    with _TRACE_LOCK, eval_mode(model):
        flat, graph, _, paths, outputs = jit_trace_flat(model, args, kwargs)
    return TracedModel(
        graph=graph, root=flat, scope_prefix="model.", example_inputs=originals,
        input_paths=paths, reference_outputs=[o.detach() for o in outputs],
        output_paths=list(flat.out_paths), output_spec=flat.out_spec,
        tensor_names=canonical_tensor_names(flat, "model."),
    )


def _run_scripted(module: Any, args: tuple[Any, ...]) -> Any:
    """One call of a ScriptModule on the example inputs; its failure (inputs of the wrong
    shape, number or dtype) is a :class:`TraceError` naming the inputs given."""
    try:
        return module(*args)
    except (RuntimeError, TypeError, ValueError, IndexError) as exc:
        from t2n.frontend.jit.harden import scripted_call_failed

        raise scripted_call_failed(exc, args) from exc


def with_state_outputs(out: tuple[Any, ...], state: Sequence[Any]) -> tuple[list[torch.Tensor], list[str], Spec]:
    """The outputs of a hardened graph with explicit attribute state, ``(result, state
    after the call...)``: the result's tensors named as usual, then one output per
    attribute named ``<attribute>_out``."""
    tensors, paths, spec = flatten(out[0])
    leaves = []
    for a, value in zip(state, out[1:]):
        tensors.append(value)
        paths.append(a.output_name)
        leaves.append(Spec("leaf", value=len(tensors) - 1))
    if paths[: len(paths) - len(state)] == [""]:
        paths[0] = "0"
    return tensors, paths, Spec("tuple", (spec, *leaves))


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
    tensors, paths, _ = flatten((args, {}))
    hardened, original, out = _scripted_reference(module, args, harden=harden, diagnostics=diagnostics)
    out_tensors, out_paths, out_spec = flatten(out)
    if hardened is not None and hardened.state:
        out_tensors, out_paths, out_spec = with_state_outputs(out, hardened.state)
        paths = paths[: len(hardened.example_inputs) - len(hardened.state)] + \
            [f"1.{a.input_name}" for a in hardened.state]
    if hardened is not None:
        tensors = list(hardened.example_inputs)
    graph, root = _inlined_graph(hardened, original)
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


def _scripted_reference(module: Any, args: tuple[Any, ...], *, harden: bool,
                        diagnostics: dict[str, Any] | None) -> tuple[HardenedGraph | None, Any, Any]:
    """The hardened graph (None when not hardening), the original ScriptModule and its
    reference output (a graph hardened earlier runs on clones of the example inputs it was
    hardened for, not on ``args``)."""
    from t2n.frontend.jit.harden import HardenedGraph, harden_jit_for_export

    if isinstance(module, HardenedGraph):
        return module, module.module, module(*[t.clone() for t in module.example_inputs])
    with eval_mode(module), torch.no_grad():
        if harden:
            hardened = harden_jit_for_export(module, args, diagnostics=diagnostics)
            return hardened, module, hardened.reference
        return None, module, _run_scripted(module, args)


def _inlined_graph(hardened: HardenedGraph | None, original: Any) -> tuple[Any, Any]:
    """A copy of the graph to lower (the hardened one, else the original's forward) with
    calls, autograd functions and dead code inlined away, and the module its attributes
    are read from."""
    if hardened is not None:
        graph = hardened.graph.copy()
        root: Any = hardened.module
    else:
        forward: Any = original.forward
        graph = forward.graph.copy()
        root = original
    torch_private.inline_calls(graph)
    inline_autograd_functions(graph, None)
    torch_private.dead_code_elimination(graph)
    mark_quantized_forms(graph)
    return graph, root
