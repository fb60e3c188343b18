"""The jit frontend (``frontend="jit"``, the default): ``torch.jit.trace`` of an
``nn.Module`` (with its extractors and ``weights_from``), or the graph of a given
ScriptModule hardened for the example inputs; lowered node by node
(:mod:`t2n.frontend.lower`)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from t2n.errors import InvalidArgumentError
from t2n.frontend.base import Frontend, FrontendOptions, ReadModel, TracedProgram
from t2n.frontend.export.program import is_exported_program
from t2n.frontend.extractors import ExtractedCalls
from t2n.frontend.jit.baked_sizes import size_conversion_lines
from t2n.frontend.jit.harden import HardenedGraph
from t2n.frontend.lower import lower
from t2n.frontend.trace import TracedModel, script_graph, trace_module
from t2n.frontend.trace_replay import report as report_untraced
from t2n.ir import Graph


class JitFrontend(Frontend):
    """``torch.jit.trace``, or a ScriptModule's own graph."""

    name: ClassVar[str] = "jit"

    def check_options(self, options: FrontendOptions) -> None:
        if options.dynamic_shapes is not None:
            raise InvalidArgumentError(
                "dynamic_shapes (torch.export's form) is for frontend=\"export\"; with the jit frontend "
                "give dynamic_axes={'input_0': {1: 'S'}}, or pass frontend=\"export\"")

    def check_model(self, model: object) -> None:
        if is_exported_program(model):
            raise InvalidArgumentError(
                "model is a torch.export.ExportedProgram, which the jit frontend cannot read; "
                "pass frontend=\"export\" (or the nn.Module itself)")
        if not isinstance(model, (torch.nn.Module, HardenedGraph)):
            raise InvalidArgumentError(f"model must be a torch.nn.Module, got {type(model).__name__}")

    def read(self, model: Any, args: tuple[Any, ...], options: FrontendOptions) -> tuple[TracedProgram, Any]:
        if isinstance(model, (torch.jit.ScriptModule, HardenedGraph)):
            if options.extractors:
                raise InvalidArgumentError("extractors apply to traced torch.nn.Module models, not ScriptModules")
            if options.kwargs:
                raise InvalidArgumentError("keyword arguments are not supported for ScriptModules")
            if options.weights_from is not None:
                raise InvalidArgumentError("weights_from is for torch.nn.Module models, not ScriptModules")
            return script_graph(model, args, harden=options.auto_harden_jit,
                                diagnostics=options.jit_diagnostics), None
        extracted = ExtractedCalls(options.extractors) if options.extractors else None
        traced = trace_module_with_weights(model, args, dict(options.kwargs or {}), options.weights_from,
                                           extracted, draws=options.sampling == "inputs")
        report_untraced(traced.untraced, strict=options.strict)
        return traced, None

    def lower(self, read: ReadModel, options: FrontendOptions) -> Graph:
        assert isinstance(read.traced, TracedModel)
        graph = lower(read.traced, options.registry, read.input_names, read.output_names,
                      static_sizes=not read.axes, op_set=options.op_set,
                      native_ops=options.target.native_ops(), sampling=options.sampling)
        graph.info.size_conversions = size_conversion_lines(
            read.traced.size_specializations, read.input_names,
            [t.dim() for t in read.traced.example_inputs], read.axes)
        return graph


def trace_module_with_weights(
    model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], weights_from: Any,
    extracted: ExtractedCalls | None = None, *, draws: bool = False,
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
        return trace_module(model, args, kwargs, extracted, draws=draws)
    source = weight_source(weights_from) if weights_from is not None else None
    weights = resolve_weights(model, source, canonical_tensor_names(model, ""))
    if meta:
        from t2n.frontend.meta_trace import trace_meta_module

        traced = trace_meta_module(model, args, kwargs, extracted)
    else:
        traced = trace_module(model, args, kwargs, extracted, draws=draws)
    traced.weights = weights
    return traced
