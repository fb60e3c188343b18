"""``t2n.compile``: trace or script → lower → passes → render, with PyTorch's reference
outputs kept for ``Artifact.check``."""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import attrs
import numpy as np
import torch

import t2n
from t2n.artifact import Artifact
from t2n.backends.nnef.context import label_to_path
from t2n.backends.nnef.renderer import RenderedModel
from t2n.backends.nnef.versions import native_ops
from t2n.backends.target import Target
from t2n.check.bundle import IRRecorder, recording
from t2n.check.compare import Tolerance
from t2n.dropin.checking import resolve_check
from t2n.dropin.reify import tract_form_passes
from t2n.errors import DynamicAxesError, InvalidArgumentError, T2NError
from t2n.frontend.export import check_frontend, obtain_program
from t2n.frontend.export.lower import lower_program
from t2n.frontend.export.shapes import dynamic_request_for, lowering_shapes
from t2n.frontend.extractors import ExtractedCalls, ModuleExtractor, check_extractors
from t2n.frontend.io import normalize_args
from t2n.frontend.io_match import checked_io_names, pass_through
from t2n.frontend.jit.harden import HardenedGraph
from t2n.frontend.lower import lower
from t2n.frontend.registry import LoweringRegistry
from t2n.frontend.specialization import report as report_specializations
from t2n.frontend.trace import TracedModel, script_graph, trace_module
from t2n.frontend.weight_guard import guarded_tensors
from t2n.ir import DType, Graph, OpSet, TensorData, print_graph, verify
from t2n.ir.tensor_data import converted
from t2n.options import (
    check_compile_options,
    check_export_options,
    check_op_set,
    check_symbols_apart,
    check_target,
    confirm_rendered_names,
)
from t2n.passes.base import Pass
from t2n.passes.dynamic_axes import normalize_dynamic_axes
from t2n.passes.pipeline import builtin_passes, compile_pipeline
from t2n.passes.precision import forced_pass_names
from t2n.passes.spec import PipelineSpec
from t2n.quant.model import q4_0_scales, with_q4_0
from t2n.quant.q4_0 import is_q4_0
from t2n.serialize.archive import ArtifactWriter, open_writer
from t2n.serialize.dat import dat_size
from t2n.serialize.overlap import EarlyWriter, PlannedTensor, ordered_like
from t2n.serialize.progress import Progress
from t2n.serialize.torch_io import tensor_data

log = logging.getLogger("t2n")


def _to_numpy(t: torch.Tensor, bf16_as: np.dtype | None = None) -> np.ndarray:
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.float().numpy() if bf16_as is None else t.float().numpy().astype(bf16_as)
    return t.numpy()


def _trace_module_with_weights(
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


def parameter_paths(model: torch.nn.Module) -> list[str]:
    """The member paths of the model's parameters, in module order: the order in which
    an artifact lists its tensors (those it holds), and ``export`` writes them early."""
    return [label_to_path(name) + ".dat" for name, _ in model.named_parameters()]


def planned_tensors(
    model: torch.nn.Module, bf16_as: DType, weights: Mapping[str, TensorData] | None = None
) -> list[PlannedTensor]:
    """The model's parameters as an artifact of it would hold them: the member path of
    their dotted name, their data (``weights[name]`` when given, else their own memory;
    bf16 seen as ``bf16_as``), in module order.

    This is a prediction (a pass may fold or transform a parameter); ``export`` checks it
    against the compiled artifact.
    """
    out: list[PlannedTensor] = []
    scales = q4_0_scales(model)
    for name, p in model.named_parameters():
        path = label_to_path(name) + ".dat"
        unchanged: Callable[[], bool]
        if weights is not None and name in weights:
            data, unchanged = weights[name], _always
        else:
            if p.device.type != "cpu" or p.layout != torch.strided or p.is_conj() or p.is_neg():
                continue
            try:
                version = p._version
                data = tensor_data(p)
            except (RuntimeError, InvalidArgumentError):  # meta or inference tensors, unsupported dtypes
                continue
            unchanged = functools.partial(_same_version, p, version)
        data = with_q4_0(scales, p, data, name)  # a weight t2n.quantize made Q4_0: written as blocks
        if data.dtype is DType.BF16 and not is_q4_0(data):
            data = converted(data, bf16_as)
        out.append(PlannedTensor(path, data, data.dtype, unchanged))
    return out


def _always() -> bool:
    return True


def _same_version(t: torch.Tensor, version: int) -> bool:
    return t._version == version


def _dumper(folder: str | Path | None) -> Callable[[str, Graph], None] | None:
    if folder is None:
        return None
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)

    def dump(label: str, graph: Graph) -> None:
        (root / f"{label}.ir").write_text(print_graph(graph, with_locs=True))

    return dump


def merge_dynamic_axes(
    target: Target, given: Mapping[str, Mapping[int, str]] | None
) -> dict[str, dict[int, str]]:
    """The dynamic axes of the compile call and of the target, merged (they must agree)."""
    merged: dict[str, dict[int, str]] = {}
    for source in (getattr(target, "dynamic_axes", None), given):
        for name, axes in (source or {}).items():
            for axis, sym in axes.items():
                prev = merged.setdefault(name, {}).get(axis)
                if prev is not None and prev != sym:
                    raise DynamicAxesError(
                        f"input {name!r} axis {axis}: symbol {prev!r} on the target but {sym!r} in compile()"
                    )
                merged[name][axis] = sym
    if merged and not target.supports_symbols:
        raise DynamicAxesError(
            f"{target} has no symbolic dimensions, so dynamic_axes cannot be honoured; export "
            "to TractNNEF for inputs of any size, or drop dynamic_axes to export at the traced size"
        )
    return merged


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _gc_paused(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run ``fn`` with Python's cyclic garbage collector paused (then as it was).

    Compiling an LLM makes tens of thousands of small objects and frees almost none, so
    the collector's passes over them (and over the model's own objects) find nothing and
    cost up to half of the lowering time (0.56 s → 0.29 s for the 16-layer Llama).
    """

    @functools.wraps(fn)
    def paused(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return paused


@_gc_paused
def compile(
    model: torch.nn.Module,
    args: Any,
    target: Target | None = None,
    *,
    kwargs: Mapping[str, Any] | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    passes: PipelineSpec = (),
    pass_registry: Mapping[str, Pass] | None = None,
    registry: LoweringRegistry | None = None,
    op_set: OpSet | None = None,
    extractors: Sequence[ModuleExtractor] | None = None,
    check_io: bool | None = None,
    tolerance: Tolerance | str | None = None,
    log_level: int | str | None = None,
    verify_ir: bool = False,
    dump_ir: str | Path | None = None,
    dynamic_axes: Mapping[str, Mapping[int, str]] | None = None,
    custom_extensions: Sequence[str] = (),
    strict_dynamic_axes: bool = False,
    auto_harden_jit: bool = True,
    jit_diagnostics: dict[str, Any] | None = None,
    fold_batch_norm: bool = True,
    weights_from: Any = None,
    strict: bool = False,
    nnef_variable_naming_scheme: str = "natural_verbose",
    check_io_names_qte_match: bool = True,
    allow_same_io_names: bool = False,
    debug_bundle_path: str | os.PathLike[str] | None = None,
    frontend: str = "jit",
    dynamic_shapes: Any = None,
) -> Artifact:
    """Export ``model`` called on ``args`` (and ``kwargs``) for ``target``.

    Inputs and outputs may be tensors nested in tuples, lists and dicts; they are
    flattened depth-first (dicts in insertion order) and named ``input_0``,
    ``attention_mask``, ``logits``… unless ``input_names``/``output_names`` are given.
    Given names are used exactly or refused with an ``InvalidArgumentError`` naming the
    name and the rule: each must be a string of ASCII letters, digits and ``_`` not
    starting with a digit, not an NNEF keyword (``graph``, ``version``, ``tensor``…),
    and on tract not starting with ``true``, ``false`` or ``inf`` (tract reads those as
    literals); input and output names must all differ, and differ from the
    ``dynamic_axes`` symbols. Derived names are made valid instead (``my key`` →
    ``my_key``, ``graph`` → ``graph_``, an output ``x`` beside an input ``x`` →
    ``x_1``) with a logged warning. Either way ``artifact.input_names`` and
    ``output_names`` are the names in graph.nnef. An output that returns an input
    unchanged is written as a ``copy`` of it under the output's own name.
    ``registry`` (a ``LoweringRegistry``) holds the rules from aten ops to IR ops and
    ``op_set`` (an ``OpSet``, e.g. ``OpSet.default().extended(my_ops)``) the IR ops they
    may create; emitters for new IR ops are added to the target
    (``TractNNEF().with_emitters(...)``).
    ``passes`` is a list of ``t2n.Pass`` objects run after the built-in passes (then
    cleaned up after), or a pipeline spec by name such as ``"default,-fold-batch-norm,
    +my-pass@after:fold-batch-norm"`` or a list mixing names and Pass objects, with
    user passes named in ``pass_registry={"my-pass": MyPass()}`` (see
    :mod:`t2n.passes.spec` and :mod:`t2n.passes.pipeline`); ``check_io`` runs the result in the
    target's engine and raises if it differs from PyTorch (``None``: the target's
    ``check_io``, else no; ``tolerance`` ``None``: the target's ``check_io_tolerance``,
    else ``approximate``; see :mod:`t2n.dropin.checking`); ``verify_ir`` checks the IR
    after every pass and ``dump_ir`` writes it to a folder after each change.

    ``dynamic_axes={"inp": {1: "S"}}`` makes axis 1 of input ``inp`` the symbol ``S``
    (tract only; also accepted as ``TractNNEF(dynamic_axes=...)``); every size computed
    from it stays in the graph. The list form ``{"inp": [1]}`` (as in ONNX export) names
    the symbol ``inp_dim1`` (``inp_dim_minus1`` for axis -1). Axes are ints: ``{"1": "S"}``
    is refused, as are unknown input names and axes out of range. ``custom_extensions``
    adds ``extension`` lines such as ``"tract_assert S + P <= 4096"`` (one line each,
    without ``;``, ``#`` or line breaks). Sizes baked into the trace that should follow
    a symbol give a ``t2n.BakedSizeWarning`` naming the op and module path, or a
    ``DynamicAxesError`` with ``strict_dynamic_axes=True``. Every option is checked
    before the model is traced (:mod:`t2n.options`): a typo in ``tolerance`` does not
    wait for the trace or the engine.

    A ``torch.jit.ScriptModule`` (scripted, or loaded with ``torch.jit.load``) is hardened
    for the example inputs first (``auto_harden_jit``; see ``t2n.harden_jit_for_export``),
    with the change counts of each step in ``jit_diagnostics`` if a dict is given.

    ``extractors=[t2n.ModuleExtractor(MyBlock, lower=fn)]`` exports every ``MyBlock``
    instance as ``fn(ctx, module, *args, **kwargs)`` builds it, without tracing its
    ``forward`` (see :mod:`t2n.frontend.extractors`). Custom ``torch.autograd.Function``s
    are exported as the ops their ``forward`` runs, and ``torch.library`` custom ops as
    one node that a rule in ``registry`` lowers.

    ``fold_batch_norm=False`` keeps batch norms apart from the conv/linear layers before
    them (by default they are folded into those layers' weights and biases); it is the
    same as ``-fold-batch-norm`` in a pipeline spec.

    ``weights_from`` (a ``.safetensors`` file, sharded checkpoint, ``.pt``/``.bin`` file,
    or a mapping name → tensor) supplies parameters by name, read from disk only when
    the artifact is saved: a model built on the meta device is exported without its
    weights ever being in memory (it then has no PyTorch reference outputs; check it
    with ``artifact.check(inputs=..., expected=...)``).

    Where ``forward`` turns a tensor computed from the inputs' data into a Python value
    (``if x.sum() > 0:``, ``.item()``, ``int(t)``, ``t.tolist()``, ``torch.tensor`` of
    tensors), the trace keeps the value the example inputs gave: the artifact is
    specialised to them. Each such place gives a ``t2n.SpecializedTraceWarning`` naming
    its source line and module; ``strict=True`` raises ``SpecializedTraceError`` listing
    all of them instead. Sizes, constants and parameters are not reported. A forward
    that writes its own parameters or buffers is exported as PyTorch ran that call (the
    writes start from the values before it), or refused with ``StateMutationError``.
    The artifact keeps references to the model's weights: changing them after
    ``compile`` makes ``save``/``check`` raise ``WeightsChangedError`` (compile again).

    ``nnef_variable_naming_scheme`` names graph.nnef's tensors: ``"natural_verbose"``
    (module path and op, ``encoder_0_fc1_matmul``), ``"natural_verbose_camel"``
    (``encoder0Fc1Matmul``), ``"raw"`` (the trace's names) or ``"numeric"`` (``v0``,
    ``v1``…); see :mod:`t2n.backends.nnef.naming`. ``check_io_names_qte_match`` refuses
    ``input_names``/``output_names`` that name something the trace did not keep as a
    tensor (``None``, an int) with ``IONamesMismatchError``; ``False`` drops such names
    instead. ``allow_same_io_names=True`` lets an output returning an input unchanged
    carry that input's name (tract only; see :mod:`t2n.frontend.io_match`).
    ``debug_bundle_path`` is where a failed check (``check_io`` or a later
    ``artifact.check()``) writes its debug bundle: a folder, or one archive for a
    ``.tgz``/``.tar`` path, with the IR after every pass and a ``replay.py``
    (see :mod:`t2n.check.bundle`); nothing is written when the check passes.

    ``frontend="export"`` reads the model with ``torch.export`` instead of
    ``torch.jit.trace`` (``model`` may then also be a ``torch.export.ExportedProgram``);
    see :mod:`t2n.frontend.export`. Its dynamic sizes are ``dynamic_axes`` as above, or
    ``dynamic_shapes`` in torch.export's form (one of the two; see
    :mod:`t2n.frontend.export.shapes`); what torch.export refuses is an ``ExportFrontendError``.
    """
    frontend = check_frontend(frontend, model, extractors)
    target = check_target(target)
    check_io, tolerance = resolve_check(target, check_io, tolerance, default=False)
    op_set = check_op_set(op_set)
    opts = check_compile_options(target, input_names=input_names, output_names=output_names, passes=passes,
                                 pass_registry=pass_registry,
                                 tolerance=tolerance, log_level=log_level, dynamic_axes=dynamic_axes,
                                 custom_extensions=custom_extensions, kwargs=kwargs, flags=dict(
                                     check_io=check_io, verify_ir=verify_ir, fold_batch_norm=fold_batch_norm,
                                     strict_dynamic_axes=strict_dynamic_axes, auto_harden_jit=auto_harden_jit,
                                     strict=strict, check_io_names_qte_match=check_io_names_qte_match,
                                     allow_same_io_names=allow_same_io_names),
                                 naming_scheme=nnef_variable_naming_scheme, debug_bundle_path=debug_bundle_path)
    if opts.log_level is not None:
        logging.getLogger("t2n").setLevel(opts.log_level)
    if frontend == "jit" and not isinstance(model, (torch.nn.Module, HardenedGraph)):
        raise InvalidArgumentError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    pos_args = normalize_args(args)
    request = dynamic_request_for(frontend, model, pos_args, kwargs, input_names,
                                  merge_dynamic_axes(target, opts.dynamic_axes), dynamic_shapes)
    traced = obtain_program(model, pos_args, kwargs, weights_from=weights_from, dynamic_shapes=request) \
        if frontend == "export" else \
        _trace_any(model, pos_args, kwargs, check_extractors(extractors), weights_from, auto_harden_jit,
                   jit_diagnostics)
    specialized = report_specializations(traced.specializations, strict=strict)
    timings["trace"] = time.perf_counter() - t0
    ins, outs, same = checked_io_names(input_names, output_names, traced, pos_args, kwargs, target,
                                       check=check_io_names_qte_match, allow_same=allow_same_io_names)
    axes = normalize_dynamic_axes(
        merge_dynamic_axes(target, opts.dynamic_axes),
        {n: t.dim() for n, t in zip(ins, traced.example_inputs)},
    )
    check_symbols_apart(axes, [*ins, *outs])

    t0 = time.perf_counter()
    registry = registry or LoweringRegistry.default()
    graph = lower_program(traced, registry, ins, outs, op_set=op_set, native_ops=native_ops(target),
                          **lowering_shapes(traced, ins, request, strict=strict_dynamic_axes)) \
        if frontend == "export" else lower(traced, registry, ins, outs, static_sizes=not axes,
                                           op_set=op_set, native_ops=native_ops(target))
    graph.info.input_names, graph.info.output_names = tuple(ins), tuple(outs)
    graph.info.naming_scheme = opts.naming_scheme
    pass_through(graph, same, ins, outs)
    graph.info.specializations = specialized
    graph.info.properties = {"t2n_version": t2n.__version__, "torch_version": torch.__version__.split("+")[0]}
    timings["lowering"] = time.perf_counter() - t0
    if verify_ir:
        verify(graph)

    t0 = time.perf_counter()
    recorder = IRRecorder() if opts.debug_bundle_path is not None else None
    dump = recording(_dumper(dump_ir), recorder)
    if dump is not None:
        dump("000-lowered", graph)
    builtins = builtin_passes(bf16_as=target.bf16_as, dynamic_axes=axes if request is None else {},
                              strict_dynamic_axes=strict_dynamic_axes,
                              verify_each=verify_ir, dump=dump)
    result = compile_pipeline(passes, registry=pass_registry, builtins=builtins, fold_batch_norm=fold_batch_norm,
                              verify_each=verify_ir, dump=dump, force_f32=forced_pass_names(target),
                              target_passes=tract_form_passes(target))(graph)
    graph = result.graph
    timings["passes"] = time.perf_counter() - t0

    graph.info.custom_extensions += opts.custom_extensions
    t0 = time.perf_counter()
    rendered = _render(target, graph, model, traced, ins, outs)
    timings["emission"] = time.perf_counter() - t0

    artifact = Artifact(
        ir=graph,
        target=target,
        rendered=rendered,
        input_names=ins,
        output_names=outs,
        example_inputs=[_to_numpy(t, target.bf16_as.numpy) for t in traced.example_inputs],
        reference_outputs=[_to_numpy(t) for t in traced.reference_outputs],
        debug_bundle_path=opts.debug_bundle_path,
        ir_stages=recorder.stages if recorder is not None else [],
        stats={"timings": timings, "pass_stats": dict(result.stats)},
    )
    if check_io:
        artifact.check(opts.tolerance)
    return artifact


def _trace_any(
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
    return _trace_module_with_weights(model, pos_args, dict(kwargs or {}), weights_from,
                                      ExtractedCalls(claimed) if claimed else None)


def _render(target: Target, graph: Graph, model: Any, traced: TracedModel,
            ins: Sequence[str], outs: Sequence[str]) -> RenderedModel:
    """NNEF text and tensor list for ``target``; tensors in parameter order (so that
    ``export`` can write them early) and guarded against weights changed after compile."""
    rendered = target.renderer().render(graph)
    confirm_rendered_names(rendered.input_ids, rendered.output_ids, ins, outs)
    if isinstance(model, torch.nn.Module):
        rendered = attrs.evolve(rendered, tensors=tuple(ordered_like(rendered.tensors, parameter_paths(model))))
    return attrs.evolve(rendered, tensors=tuple(guarded_tensors(rendered.tensors, traced.state_read)))


@contextlib.contextmanager
def _one_core_left(writing: bool) -> Iterator[None]:
    """While weights are written beside the compile, PyTorch computes (the trace's
    forward pass) on one thread fewer than the CPUs: its parallel kernels wait for their
    slowest thread, so a thread sharing a core with the writer slows every kernel (the
    16-layer Llama's trace takes 1.5 s instead of 0.8 s on 2 cores; 1.1 s with one
    thread)."""
    before = torch.get_num_threads()
    cpus = os.cpu_count() or 1
    if writing and before >= cpus > 1:
        torch.set_num_threads(cpus - 1)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def _plan(model: torch.nn.Module, target: Target, options: dict[str, Any]) -> list[PlannedTensor]:
    """What ``export`` writes early. A ``weights_from`` source is opened here, once, and
    handed to the compile in ``options``, so both see the same lazy tensors."""
    weights_from = options.get("weights_from")
    if weights_from is None:
        return planned_tensors(model, target.bf16_as)
    from t2n.frontend.trace import canonical_tensor_names
    from t2n.serialize.torch_io import resolve_weights, weight_source

    options["weights_from"] = source = weight_source(weights_from)
    try:
        weights = resolve_weights(model, source, canonical_tensor_names(model, ""))
    except T2NError:  # the compile reports it
        return []
    return planned_tensors(model, target.bf16_as, weights)


def export(
    model: torch.nn.Module,
    args: Any,
    path: str | os.PathLike[str],
    target: Target | None = None,
    *,
    compression_level: int | None = None,
    sync: bool = False,
    progress: bool | None = None,
    overlap: bool = True,
    check_io: bool | None = None,
    tolerance: Tolerance | str | None = None,
    overwrite: bool = False,
    nnef_variable_naming_scheme: str = "natural_verbose",
    check_io_names_qte_match: bool = True,
    allow_same_io_names: bool = False,
    debug_bundle_path: str | os.PathLike[str] | None = None,
    **options: Any,
) -> Artifact:
    """``compile(model, args, target, **options).save(path, ...)`` in one call, writing
    the weights while the model compiles.

    The artifact is the same, byte for byte, as compiling then saving; but a directory or
    ``.tar`` export of a big model takes about the time of writing its weights alone:
    a thread writes the model's parameters into the archive during the trace, lowering
    and passes, and what the compile did not confirm is taken back (see
    :mod:`t2n.serialize.overlap`). ``overlap=False`` compiles first, then writes.
    ``.tgz`` archives are compressed after compiling (compression is CPU work, like
    compiling). Atomic like :meth:`Artifact.save`: if the compile fails or the export is
    interrupted, nothing is left at ``path``. ``check_io`` runs the saved artifact in the
    target's engine and raises if it differs from PyTorch (``None``: as the target's
    ``check_io`` says, else no; ``tolerance`` ``None``: the target's
    ``check_io_tolerance``). ``overwrite=True`` replaces
    what is at ``path`` even if t2n did not write it (by default that is refused before
    anything is compiled or written; see :meth:`Artifact.save`). The naming, IO-name
    and debug-bundle options are those of :func:`compile`; a failed ``check_io`` writes
    the bundle to ``debug_bundle_path``.
    """
    options.update(nnef_variable_naming_scheme=nnef_variable_naming_scheme,
                   check_io_names_qte_match=check_io_names_qte_match,
                   allow_same_io_names=allow_same_io_names, debug_bundle_path=debug_bundle_path)
    check_io, tolerance = resolve_check(check_target(target), check_io, tolerance, default=False)
    target = check_export_options(target, tolerance, options, path=path, progress=progress,
                                  flags=dict(sync=sync, overlap=overlap, check_io=check_io))
    p = Path(path)
    t_start = time.perf_counter()
    writer = open_writer(p, compression_level, sync=sync, overwrite=overwrite)
    early: EarlyWriter | None = None
    try:
        planned: list[PlannedTensor] = []
        if overlap and writer.can_rollback and isinstance(model, torch.nn.Module) and \
                not isinstance(model, torch.jit.ScriptModule):
            planned = _plan(model, target, options)
        with Progress(sum(dat_size(t.data, t.dtype) for t in planned), f"writing {p.name}",
                      bar=progress) as bar:
            early = EarlyWriter(writer, planned, bar, order=parameter_paths(model)).start() if planned else None
            try:
                with _one_core_left(early is not None):
                    artifact = compile(model, args, target, check_io=False, **options)
            except BaseException:
                if early is not None:
                    early.cancel()
                raise
            t_compiled = time.perf_counter()
            tensors = list(artifact.rendered.tensors)
            rest = early.finish(tensors) if early is not None else tensors
            members = list(artifact.members(rest))
            bar.set_total(bar.done + sum(size for _, size, _ in members))
            for name, size, chunks in members:
                writer.add_stream(name, size, bar.track(chunks))
            writer.commit()
    except BaseException:
        writer.abort()
        raise
    artifact.saved_path = p
    _record_export(artifact, writer, planned, early, t_start, t_compiled)
    log.info("exported %s (%d bytes of members; %s written while compiling)", p, writer.bytes_written,
             artifact.stats["overlap"]["kept_bytes"])
    if check_io:
        artifact.check(tolerance)
    return artifact


def _record_export(artifact: Artifact, writer: ArtifactWriter, planned: Sequence[PlannedTensor],
                   early: EarlyWriter | None, t_start: float, t_compiled: float) -> None:
    """What ``export`` wrote, when, and how much of it while compiling, in ``artifact.stats``."""
    artifact.stats["bytes_written"] = writer.bytes_written
    timings = artifact.stats.setdefault("timings", {})
    timings["save"] = time.perf_counter() - t_compiled
    timings["export"] = time.perf_counter() - t_start
    artifact.stats["overlap"] = {
        "planned": len(planned),
        "kept": early.kept if early is not None else 0,
        "kept_bytes": early.kept_bytes if early is not None else 0,
        "written_early": len(early.written) if early is not None else 0,
    }
    if writer.compressor_name:
        artifact.stats["compressor"] = writer.compressor_name
