"""The front of ``t2n.compile``: the model read by its frontend (``options.frontend``),
with the names and dynamic axes of its inputs and outputs settled before anything is
lowered."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import attrs
import torch

from t2n.frontend.base import ReadModel
from t2n.frontend.io import normalize_args, note_non_tensor_outputs
from t2n.frontend.io_match import checked_io_names
from t2n.frontend.sampling import named_draws
from t2n.frontend.specialization import report as report_specializations
from t2n.frontend.transformers_experts import library_extractors, traceable_experts
from t2n.options import CompileOptions, check_symbols_apart
from t2n.passes.dynamic_axes import normalize_dynamic_axes
from t2n.serialize.torch_io import has_meta_tensors


def read_model(model: Any, args: Any, options: CompileOptions) -> ReadModel:
    """Trace (or export) ``model`` on ``args``, then name its inputs and outputs and
    settle its dynamic axes."""
    pos_args = normalize_args(args)
    traced, request = options.frontend.read(model, pos_args, options)
    specialized = report_specializations(traced.specializations, strict=options.strict)
    note_non_tensor_outputs(traced.output_spec)
    ins, outs, same = checked_io_names(options.input_names, options.output_names, traced, pos_args,
                                       options.kwargs, options.target, check=options.check_io_names_qte_match,
                                       allow_same=options.allow_same_io_names)
    traced.noise = named_draws(traced.noise, [*ins, *outs])  # compile(sampling="inputs"): after the model's
    ins = [*ins, *(d.name for d in traced.noise)]
    axes = normalize_dynamic_axes(options.dynamic_axes, {n: t.dim() for n, t in zip(ins, traced.example_inputs)})
    check_symbols_apart(axes, [*ins, *outs])
    return ReadModel(traced, request, ins, outs, same, axes, specialized)


def _traced_module(model: Any, options: CompileOptions) -> bool:
    """Whether the jit frontend traces ``model``'s forward (where extractors apply)."""
    return options.frontend.name == "jit" and isinstance(model, torch.nn.Module) \
        and not isinstance(model, torch.jit.ScriptModule)


def with_library_extractors(model: Any, options: CompileOptions) -> CompileOptions:
    """``options`` with the extractors t2n adds by itself for the library modules of
    ``model`` that the user's extractors do not claim (transformers' experts: one
    ``moe_experts`` op each, :mod:`t2n.frontend.transformers_experts`); the jit frontend
    only (torch.export's capture has no extractors)."""
    if not _traced_module(model, options):
        return options
    added = library_extractors(model, options.extractors)
    return attrs.evolve(options, extractors=(*options.extractors, *added)) if added else options


@contextlib.contextmanager
def library_tracing(model: Any, options: CompileOptions) -> Iterator[None]:
    """While the jit frontend traces a model on the meta device: transformers' experts
    modules run their batched implementation, since the grouped one cannot run there (an
    extracted module still runs, untraced, for its output's shape). With real weights the
    user's implementation is traced where no extractor claims it: the batched one would
    gather every token's expert weights, tokens x experts per token times their size."""
    if not (_traced_module(model, options) and has_meta_tensors(model)):
        yield
        return
    with traceable_experts(model):
        yield
