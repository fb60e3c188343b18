"""The front of ``t2n.compile``: the model read by its frontend (``torch.jit.trace``, a
ScriptModule's graph, or ``torch.export``), with the names and dynamic axes of its
inputs and outputs settled before anything is lowered."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import torch

from t2n.backends.target import Target
from t2n.errors import InvalidArgumentError
from t2n.frontend.export import obtain_program
from t2n.frontend.export.requests import DynamicRequest
from t2n.frontend.export.shapes import dynamic_request_for
from t2n.frontend.extractors import ExtractedCalls, ModuleExtractor, check_extractors
from t2n.frontend.io import normalize_args, note_non_tensor_outputs
from t2n.frontend.io_match import checked_io_names
from t2n.frontend.jit.harden import HardenedGraph
from t2n.frontend.specialization import report as report_specializations
from t2n.frontend.trace import TracedModel, script_graph, trace_module
from t2n.options import check_symbols_apart
from t2n.passes.dynamic_axes import normalize_dynamic_axes


@attrs.frozen
class ReadModel:
    """A model as its frontend read it, and the names its graph will carry."""

    frontend: str
    """``"jit"`` or ``"export"``."""
    traced: Any
    """The ``TracedModel`` (jit) or ``ExportedModel`` (torch.export)."""
    request: DynamicRequest | None
    """The dynamic sizes asked of torch.export (``None`` for the jit frontend)."""
    input_names: list[str]
    output_names: list[str]
    same: tuple[str, ...]
    """Output names that are also input names (outputs returning an input unchanged)."""
    axes: dict[str, dict[int, str]]
    """Input name → axis → symbol, in the normal form of :mod:`t2n.passes.dynamic_axes`."""
    specialized: list[str]
    """Where the trace kept a value computed from the inputs' data, one line each."""


def read_model(
    model: Any, args: Any, target: Target, *, frontend: str, kwargs: Mapping[str, Any] | None,
    input_names: Sequence[str] | None, output_names: Sequence[str] | None,
    dynamic_axes: Mapping[str, Mapping[int, str]], dynamic_shapes: Any,
    extractors: Sequence[ModuleExtractor] | None, weights_from: Any, harden: bool,
    diagnostics: dict[str, Any] | None, strict: bool, check_names: bool, allow_same: bool,
) -> ReadModel:
    """Trace (or export) ``model`` on ``args``, then name its inputs and outputs and
    settle its dynamic axes (options already checked by :mod:`t2n.options`;
    ``dynamic_axes`` merged with the target's there)."""
    pos_args = normalize_args(args)
    request = dynamic_request_for(frontend, model, pos_args, kwargs, input_names, dynamic_axes, dynamic_shapes)
    traced = obtain_program(model, pos_args, kwargs, weights_from=weights_from, dynamic_shapes=request) \
        if frontend == "export" else \
        trace_any(model, pos_args, kwargs, check_extractors(extractors), weights_from, harden, diagnostics)
    specialized = report_specializations(traced.specializations, strict=strict)
    note_non_tensor_outputs(traced.output_spec)
    ins, outs, same = checked_io_names(input_names, output_names, traced, pos_args, kwargs, target,
                                       check=check_names, allow_same=allow_same)
    axes = normalize_dynamic_axes(dynamic_axes, {n: t.dim() for n, t in zip(ins, traced.example_inputs)})
    check_symbols_apart(axes, [*ins, *outs])
    return ReadModel(frontend, traced, request, ins, outs, same, axes, specialized)


def trace_any(
    model: torch.nn.Module | HardenedGraph, pos_args: tuple[Any, ...], kwargs: Mapping[str, Any] | None,
    claimed: Any, weights_from: Any, harden: bool, diagnostics: dict[str, Any] | None,
) -> TracedModel:
    """Trace an ``nn.Module`` (with its extractors and ``weights_from``), or take the graph
    of a ScriptModule (hardened for the example inputs unless told not to)."""
    if isinstance(model, (torch.jit.ScriptModule, HardenedGraph)):
        if claimed:
            raise InvalidArgumentError("extractors apply to traced torch.nn.Module models, not ScriptModules")
        if kwargs:
            raise InvalidArgumentError("keyword arguments are not supported for ScriptModules")
        if weights_from is not None:
            raise InvalidArgumentError("weights_from is for torch.nn.Module models, not ScriptModules")
        return script_graph(model, pos_args, harden=harden, diagnostics=diagnostics)
    return trace_module_with_weights(model, pos_args, dict(kwargs or {}), weights_from,
                                     ExtractedCalls(claimed) if claimed else None)


def trace_module_with_weights(
    model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], weights_from: Any,
    extracted: ExtractedCalls | None = None,
) -> TracedModel:
    """Trace; parameters found in ``weights_from`` are read from there when written.

    A model with tensors on the meta device is traced with stand-ins for them (no
    weight is ever materialized; see ``t2n.frontend.meta_trace``), and then has no
    reference outputs.
    """
    from t2n.frontend.trace import canonical_tensor_names
    from t2n.serialize.torch_io import has_meta_tensors, resolve_weights, weight_source

    meta = has_meta_tensors(model)
    if not meta and weights_from is None:
        return trace_module(model, args, kwargs, extracted)
    source = weight_source(weights_from) if weights_from is not None else None
    weights = resolve_weights(model, source, canonical_tensor_names(model, ""))
    if meta:
        from t2n.frontend.meta_trace import trace_meta_module

        traced = trace_meta_module(model, args, kwargs, extracted)
    else:
        traced = trace_module(model, args, kwargs, extracted)
    traced.weights = weights
    return traced
