"""Obtaining the ExportedProgram that the export frontend lowers, and what the rest of
``compile`` needs from it (example inputs, PyTorch's reference outputs, io paths).

An ``nn.Module`` is exported with ``torch.export.export(..., strict=False)`` in eval
mode; an ``ExportedProgram`` given as the model is used as it is. Either way the
program is decomposed to core ATen, keeping the ops of :mod:`.kept_ops` whole.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs
import torch
from torch.utils._pytree import tree_flatten, tree_map

from t2n.errors import InvalidArgumentError, TraceError
from t2n.frontend.export.constant_items import fold_constant_items
from t2n.frontend.export.kept_ops import decomposition_table
from t2n.frontend.io import Spec, flatten, without_objects
from t2n.frontend.sampling import DrawRecorder, NoiseDraw, has_draws, program_draws
from t2n.frontend.specialization import Specialization
from t2n.frontend.trace import canonical_tensor_names, eval_mode
from t2n.serialize.torch_io import has_meta_tensors, resolve_weights, weight_source


@attrs.define
class ExportedModel:
    """A decomposed ExportedProgram and what ``compile`` reads of a traced model (the
    same attribute names as :class:`t2n.frontend.trace.TracedModel`)."""

    program: torch.export.ExportedProgram
    example_inputs: list[torch.Tensor]
    input_paths: list[str]
    reference_outputs: list[torch.Tensor]
    output_paths: list[str]
    output_spec: Spec | None
    tensor_names: dict[int, str] = attrs.field(factory=dict)
    """id(tensor) → the name the jit frontend gives it (its first dotted name)."""
    start_values: dict[str, torch.Tensor] = attrs.field(factory=dict)
    """Buffers the program writes: their values before the call (the artifact's data)."""
    weights: dict[str, Any] = attrs.field(factory=dict)
    """State name → IR tensor data read from elsewhere (``compile(weights_from=...)``)."""
    state_read: dict[str, torch.Tensor] = attrs.field(factory=dict)
    specializations: list[Specialization] = attrs.field(factory=list)
    tracer_warnings: list[str] = attrs.field(factory=list)
    outputs_are_flat: bool = False
    noise: list[NoiseDraw] = attrs.field(factory=list)
    """Random draws made graph inputs (``compile(sampling="inputs")``), in graph order;
    their values end ``example_inputs``."""


def is_exported_program(model: object) -> bool:
    return isinstance(model, torch.export.ExportedProgram)


def export_program(
    model: torch.nn.Module | torch.export.ExportedProgram,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any] | None,
    *,
    dynamic_shapes: Any = None,
    weights_from: Any = None,
    draws: bool = False,
) -> ExportedModel:
    """The model as a core-ATen ExportedProgram, with its example inputs and reference
    outputs (computed by PyTorch on ``args``/``kwargs``).

    ``weights_from`` supplies parameters by name as for the jit frontend; a model on the
    meta device is exported on meta inputs and has no reference outputs. ``draws``: keep
    the program's random draws as graph inputs (``compile(sampling="inputs")``): the
    reference outputs then come from a run of the decomposed program that records what
    each draw returned."""
    kw = dict(kwargs or {})
    tensors, paths, _ = flatten((args, kw))
    if not tensors:
        raise InvalidArgumentError("the example arguments contain no tensor")
    originals = [t.detach().clone() for t in tensors]
    runnable: torch.nn.Module
    if isinstance(model, torch.export.ExportedProgram):
        if weights_from is not None:
            raise InvalidArgumentError("weights_from is for nn.Module models; an ExportedProgram carries "
                                       "its weights (export the module with weights_from instead)")
        program, runnable = model, model.module()
        names = _first_names(model.state_dict.items())
    else:
        meta = has_meta_tensors(model)
        if meta:
            args, kw = tree_map(_to_meta, (args, kw))
        with eval_mode(model), _objects_left_out_of_outputs(model):
            program = _export(model, args, kw, dynamic_shapes)
        runnable, names = model, canonical_tensor_names(model, "")
    weights = {} if weights_from is None else resolve_weights(runnable, weight_source(weights_from), names)
    fold_constant_items(program)  # before the retrace, which then sees plain numbers
    program = program.run_decompositions(decomposition_table())
    start = _mutated_buffers_before(program)
    noise: list[NoiseDraw] = []
    if draws and has_draws(program):
        out_tensors, out_paths, out_spec, noise = _reference_with_draws(program, args, kw)
    else:
        out_tensors, out_paths, out_spec = _reference(runnable, args, kw, ep_module=runnable is not model)
    return ExportedModel(
        program=program, example_inputs=originals + [d.values for d in noise], input_paths=paths,
        noise=noise,
        reference_outputs=[] if out_tensors[0].is_meta else [t.detach() for t in out_tensors],
        output_paths=out_paths, output_spec=out_spec, tensor_names=names, start_values=start,
        weights=weights,
    )


def _reference(runnable: Any, args: tuple[Any, ...], kw: dict[str, Any],
               ep_module: bool) -> tuple[list[torch.Tensor], list[str], Spec]:
    """PyTorch's outputs (flat), their paths and structure; a program's module cannot
    be put in eval mode (it is traced in the mode it was exported in)."""
    with contextlib.nullcontext() if ep_module else eval_mode(runnable, note=False), torch.no_grad():
        try:
            out = runnable(*args, **kw)
        except (AssertionError, ValueError, RuntimeError, TypeError) as exc:
            if not ep_module:
                raise TraceError(f"the model failed on the example inputs: {type(exc).__name__}: {exc}") from exc
            raise InvalidArgumentError(
                f"the example inputs do not fit the ExportedProgram ({type(exc).__name__}: "
                f"{_first_lines(str(exc), 3)}); pass the arguments it was exported with, or others "
                "its dynamic shapes allow") from exc
    tensors, paths, spec = flatten(out)
    if not tensors:
        raise InvalidArgumentError("the model returned no tensor")
    return tensors, paths, spec


def _reference_with_draws(program: torch.export.ExportedProgram, args: tuple[Any, ...],
                          kw: dict[str, Any]) -> tuple[list[torch.Tensor], list[str], Spec, list[NoiseDraw]]:
    """PyTorch's outputs from one run of the decomposed program, and what each of its
    random draws returned in that run (the draws' example values)."""
    recorder = DrawRecorder(program.module())
    with torch.no_grad():
        out = recorder.run(*tree_flatten((args, kw))[0])
    tensors, paths, spec = flatten(out)
    if not tensors:
        raise InvalidArgumentError("the model returned no tensor")
    return tensors, paths, spec, program_draws(program, recorder.drawn)


def _to_meta(x: Any) -> Any:
    return x.to("meta") if isinstance(x, torch.Tensor) else x


def _first_names(items: Iterable[tuple[str, torch.Tensor]]) -> dict[int, str]:
    out: dict[int, str] = {}
    for name, t in items:
        out.setdefault(id(t), name)
    return out


def _export(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
            dynamic_shapes: Any) -> torch.export.ExportedProgram:
    """``dynamic_shapes`` in torch's form, or a :class:`~.requests.DynamicRequest`; what
    torch.export raises becomes a typed error (:func:`.refusals.export_errors`)."""
    from t2n.frontend.export.refusals import export_with_request
    from t2n.frontend.export.requests import DynamicRequest

    request = dynamic_shapes if isinstance(dynamic_shapes, DynamicRequest) else DynamicRequest(dynamic_shapes)
    return export_with_request(model, args, kwargs, request)


@contextlib.contextmanager
def _objects_left_out_of_outputs(model: torch.nn.Module) -> Iterator[None]:
    """While torch.export runs, the model returns ``None`` in place of objects that are
    not tensors (a transformers ``DynamicCache``: torch.export refuses a class its pytree
    does not know). The artifact leaves them out on either frontend (a warning says so)."""
    forward = model.forward
    patched = "forward" in vars(model)

    @functools.wraps(forward)
    def tensors_only(*args: Any, **kwargs: Any) -> Any:
        return without_objects(forward(*args, **kwargs))

    model.forward = tensors_only  # type: ignore[method-assign]
    try:
        yield
    finally:
        if patched:
            model.forward = forward  # type: ignore[method-assign]
        else:
            del model.forward


def _mutated_buffers_before(program: torch.export.ExportedProgram) -> dict[str, torch.Tensor]:
    """Copies of the buffers the program writes, taken before PyTorch runs the model for
    its reference outputs (which writes them): the artifact starts from these values."""
    from torch.export.graph_signature import OutputKind

    out: dict[str, torch.Tensor] = {}
    for spec in program.graph_signature.output_specs:
        if spec.kind == OutputKind.BUFFER_MUTATION and spec.target is not None:
            t = program.state_dict.get(spec.target)
            if t is None:
                t = program.constants.get(spec.target)
            if isinstance(t, torch.Tensor):
                out[spec.target] = t.detach().clone()
    return out


def _first_lines(text: str, n: int = 6) -> str:
    lines = text.strip().splitlines()
    return "\n".join(lines[:n]) + ("\n..." if len(lines) > n else "")
