"""The options of one compile, checked once, at the entry point, into one object.

``compile``, ``export``, ``export_model_to_nnef``, ``t2n export`` and ``t2n llm`` each
make a :class:`CompileOptions` with :func:`compile_options` before anything runs, and
hand that object to the stages (:mod:`t2n.driver`), which never read a keyword again:
the frontend (a :class:`~t2n.frontend.base.Frontend` object), the lowering registry and
op set, the pass pipeline (built here, once), the target and the checking settings all
travel in it. ``export`` also checks where and how it writes (:class:`WriteOptions`).

A wrong option is reported as an :class:`~t2n.errors.InvalidArgumentError` (or a
:class:`~t2n.errors.DynamicAxesError` for ``dynamic_axes``) that names the argument,
before the model is traced and before any engine runs: a typo in ``tolerance`` or
``log_level`` does not wait for a long trace, nor for ``check_io``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from t2n.backends.nnef.extensions import check_custom_extensions
from t2n.backends.nnef.naming import check_naming_scheme
from t2n.backends.target import Target
from t2n.backends.tract.target import TractNNEF
from t2n.check.bundle import IRRecorder, recording
from t2n.check.compare import Tolerance
from t2n.errors import DynamicAxesError, InvalidArgumentError
from t2n.frontend.base import Frontend
from t2n.frontend.export.frontend import ExportFrontend
from t2n.frontend.extractors import ModuleExtractor, check_extractors
from t2n.frontend.io import check_given_names
from t2n.frontend.io_match import same_names
from t2n.frontend.jit.frontend import JitFrontend
from t2n.frontend.prefix_names import kept_kind
from t2n.frontend.registry import LoweringRegistry
from t2n.frontend.sampling import check_sampling
from t2n.ir import Graph, OpSet, OpTable, print_graph
from t2n.passes.base import Pass
from t2n.passes.dynamic_axes import dynamic_axes_form
from t2n.passes.manager import DumpFn, PassManager
from t2n.passes.pipeline import builtin_passes, check_pass_registry, compile_pipeline
from t2n.passes.precision import check_forcing_target
from t2n.passes.spec import PipelineSpec
from t2n.remodel.export import RemodelStep, plan_axes, remodel_step

FRONTENDS: Mapping[str, type[Frontend]] = {"jit": JitFrontend, "export": ExportFrontend}
"""The frontends ``compile(frontend=...)`` knows by name."""


@attrs.frozen(kw_only=True)
class CompileKeywords:
    """The keywords of :func:`t2n.compile` as a call gives them, with their defaults and
    the types ``compile`` documents: the one list of them. :func:`compile_options` takes
    exactly these (:data:`COMPILE_KEYWORDS`) and checks each into :class:`CompileOptions`;
    ``compile``'s signature spells them out for its readers, and a test holds the two
    equal (names, defaults and annotations). Nothing is checked here."""

    kwargs: Mapping[str, Any] | None = None
    input_names: Sequence[str] | None = None
    output_names: Sequence[str] | None = None
    passes: PipelineSpec = ()
    pass_registry: Mapping[str, Pass] | None = None
    registry: LoweringRegistry | None = None
    op_set: OpSet | None = None
    extractors: Sequence[ModuleExtractor] | None = None
    check_io: bool | None = None
    tolerance: Tolerance | str | None = None
    log_level: int | str | None = None
    verify_ir: bool = False
    dump_ir: str | Path | None = None
    dynamic_axes: Mapping[str, Mapping[int, str]] | None = None
    custom_extensions: Sequence[str] = ()
    strict_dynamic_axes: bool = False
    auto_harden_jit: bool = True
    jit_diagnostics: dict[str, Any] | None = None
    fold_batch_norm: bool = True
    weights_from: Any = None
    strict: bool = False
    nnef_variable_naming_scheme: str = "natural_verbose"
    check_io_names_qte_match: bool = True
    allow_same_io_names: bool = False
    debug_bundle_path: str | os.PathLike[str] | None = None
    frontend: str | Frontend = "jit"
    dynamic_shapes: Any = None
    remodel: Any = None
    sampling: str = "refuse"


COMPILE_KEYWORDS: tuple[str, ...] = tuple(f.name for f in attrs.fields(CompileKeywords))
"""The options ``compile`` takes by keyword (those ``export`` passes on)."""


def keywords_of(values: Mapping[str, Any]) -> dict[str, Any]:
    """The compile keywords among ``values`` (an entry point's ``locals()``, whose
    signature repeats them), to pass on to :func:`compile_options`."""
    return {name: values[name] for name in COMPILE_KEYWORDS if name in values}


@attrs.frozen(kw_only=True)
class CompileOptions:
    """Every option of one compile, checked (see :func:`compile_options` for their meaning:
    the keywords of ``t2n.compile``, :class:`CompileKeywords`)."""

    target: Target
    frontend: Frontend
    kwargs: Mapping[str, Any] | None
    input_names: tuple[str, ...] | None
    output_names: tuple[str, ...] | None
    registry: LoweringRegistry
    op_set: OpSet | None
    extractors: tuple[ModuleExtractor, ...]
    pipeline: PassManager
    """The passes ``compile`` runs after lowering: the built-in ones, the user's and the
    target's own, assembled once."""
    check_io: bool
    """Run the artifact in the target's engine when it is made (resolved: the call's,
    else the target's, else the entry point's default)."""
    tolerance: Tolerance
    log_level: int | None
    verify_ir: bool
    dump: DumpFn | None
    """Sees the lowered graph, then the graph after every pass that changed it (``dump_ir``
    and the debug bundle's record)."""
    ir_record: IRRecorder | None
    """The IR after every pass, kept for a debug bundle (when ``debug_bundle_path`` is set)."""
    dynamic_axes: dict[str, dict[int, str]]
    """Those of the call and of the target, merged (:func:`merge_dynamic_axes`)."""
    dynamic_shapes: Any
    custom_extensions: tuple[str, ...]
    strict_dynamic_axes: bool
    auto_harden_jit: bool
    jit_diagnostics: dict[str, Any] | None
    weights_from: Any
    strict: bool
    naming_scheme: str
    check_io_names_qte_match: bool
    allow_same_io_names: bool
    debug_bundle_path: Path | None
    remodel: RemodelStep | None = None
    """The remodel plan (:mod:`t2n.remodel.export`), its symbols already in ``dynamic_axes``."""
    sampling: str = "refuse"
    """Random draws inside ``forward``: refused, or made graph inputs (:mod:`t2n.frontend.sampling`)."""


def compile_options(target: object = None, *, default_check_io: bool = False, **keywords: Any) -> CompileOptions:
    """The options of one compile for ``target`` (``None``: the latest ``TractNNEF``),
    checked: ``keywords`` are those of :func:`t2n.compile`, which documents them
    (:class:`CompileKeywords`; another name is refused by name).
    ``default_check_io``: whether the engine runs when neither the call nor the target
    says (``export_model_to_nnef`` runs it; ``compile`` and ``export`` do not)."""
    given = _keywords(keywords, "compile_options()")
    chosen, checked = check_frontend(given.frontend), check_target(target)
    run, tol = resolve_check(checked, given.check_io, given.tolerance, default=default_check_io)
    flags = _flags(verify_ir=given.verify_ir, strict_dynamic_axes=given.strict_dynamic_axes,
                   auto_harden_jit=given.auto_harden_jit, fold_batch_norm=given.fold_batch_norm, strict=given.strict,
                   check_io_names_qte_match=given.check_io_names_qte_match,
                   allow_same_io_names=given.allow_same_io_names)
    call_kwargs, ins, outs = _call_arguments(checked, given.kwargs, given.input_names, given.output_names,
                                             allow_same=flags["allow_same_io_names"])
    step = remodel_step(given.remodel)
    axes = plan_axes(step, merge_dynamic_axes(checked, dynamic_axes_form(given.dynamic_axes)), checked)
    bundle, record, dump = _recorders(given.debug_bundle_path, given.dump_ir)
    options = CompileOptions(
        target=checked, frontend=chosen, kwargs=call_kwargs, input_names=ins, output_names=outs,
        registry=check_registry(given.registry), op_set=check_op_set(given.op_set),
        extractors=tuple(check_extractors(given.extractors)),
        pipeline=_pipeline(given.passes, given.pass_registry, checked, chosen, axes, dump, **flags),
        check_io=run, tolerance=tol, log_level=check_log_level(given.log_level), verify_ir=flags["verify_ir"],
        dump=dump, ir_record=record, dynamic_axes=axes, dynamic_shapes=given.dynamic_shapes,
        custom_extensions=check_custom_extensions(given.custom_extensions, allowed=checked.accepts_extension_lines),
        strict_dynamic_axes=flags["strict_dynamic_axes"], auto_harden_jit=flags["auto_harden_jit"],
        jit_diagnostics=_diagnostics(given.jit_diagnostics), weights_from=given.weights_from, strict=flags["strict"],
        naming_scheme=check_naming_scheme(given.nnef_variable_naming_scheme),
        check_io_names_qte_match=flags["check_io_names_qte_match"],
        allow_same_io_names=flags["allow_same_io_names"], debug_bundle_path=bundle, remodel=step,
        sampling=check_sampling(given.sampling),
    )
    chosen.check_options(options)
    return options


def _keywords(keywords: Mapping[str, Any], entry: str) -> CompileKeywords:
    """``keywords`` as :class:`CompileKeywords`, refusing names ``compile`` does not take,
    by name."""
    unknown = sorted(set(keywords) - set(COMPILE_KEYWORDS))
    if unknown:
        raise InvalidArgumentError(
            f"{entry} got unknown option(s) {', '.join(map(repr, unknown))}; the options it "
            f"passes to compile are: {', '.join(COMPILE_KEYWORDS)}"
        )
    return CompileKeywords(**keywords)


def _call_arguments(target: Target, kwargs: object, input_names: object, output_names: object, *,
                    allow_same: bool) -> tuple[Mapping[str, Any] | None, tuple[str, ...] | None, tuple[str, ...] | None]:
    """``kwargs`` and the given input and output names (against the target's identifier rules),
    checked in that order, so a bad keyword dict is reported before a bad name."""
    if kwargs is not None and (not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs)):
        raise InvalidArgumentError(f"kwargs must be a dict of keyword arguments (name → value), got {kwargs!r}")
    ins, outs = (None if given is None else kept_kind(given, check_given_names(given, what, rules=target.identifier_rules))
                 for what, given in (("input", input_names), ("output", output_names)))
    if ins is not None and outs is not None:
        same_names(ins, outs, allow=allow_same, target=target)
    return kwargs, ins, outs


def _recorders(debug_bundle_path: object, dump_ir: object) -> tuple[Path | None, IRRecorder | None, DumpFn | None]:
    """The debug bundle's folder, the recorder that keeps each stage's IR for it (only when a
    bundle is asked for) and the ``dump_ir`` writer, joined so one call feeds both."""
    bundle = check_bundle_path(debug_bundle_path)
    record = IRRecorder() if bundle is not None else None
    return bundle, record, recording(_ir_dumper(dump_ir), record)

def compile_options_from(target: object, options: Mapping[str, Any], *, entry: str,
                         default_check_io: bool = False) -> CompileOptions:
    """:func:`compile_options` for keywords collected by an entry point (``export(**options)``),
    refusing names ``compile`` does not take, by name (naming the entry point)."""
    _keywords(options, entry)
    return compile_options(target, default_check_io=default_check_io, **options)


@attrs.frozen(kw_only=True)
class WriteOptions:
    """Where and how ``export`` writes the artifact (its own arguments, checked)."""

    path: Path
    compression_level: int | None
    sync: bool
    progress: bool | None
    overlap: bool
    """Write the model's parameters while it compiles (:mod:`t2n.serialize.overlap`)."""
    overwrite: bool


def write_options(path: object, *, compression_level: int | None = None, sync: object = False,
                  progress: object = None, overlap: object = True, overwrite: object = False) -> WriteOptions:
    """``export``'s own arguments, checked before the destination is touched (the
    ``compression_level`` against the path's form when the writer opens it)."""
    if progress is not None and not isinstance(progress, bool):
        raise InvalidArgumentError(f"progress must be None, True or False, got {progress!r}")
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidArgumentError(f"path must be a str or a path, got {type(path).__name__} {path!r}")
    flags = _flags(sync=sync, overlap=overlap, overwrite=overwrite)
    return WriteOptions(path=Path(path), compression_level=compression_level, progress=progress, **flags)


def check_frontend(frontend: object) -> Frontend:
    """``frontend``: a name of :data:`FRONTENDS` or a :class:`~t2n.frontend.base.Frontend` object."""
    if isinstance(frontend, Frontend):
        return frontend
    if isinstance(frontend, str) and frontend in FRONTENDS:
        return FRONTENDS[frontend]()
    raise InvalidArgumentError(f"frontend must be one of {', '.join(map(repr, FRONTENDS))}, got {frontend!r}")


def check_registry(registry: object) -> LoweringRegistry:
    """``registry``: ``None`` (the built-in rules) or a :class:`LoweringRegistry`."""
    if registry is None:
        return LoweringRegistry.default()
    if isinstance(registry, LoweringRegistry):
        return registry
    raise InvalidArgumentError(
        f"registry must be a t2n.LoweringRegistry such as LoweringRegistry.default().extended(rules), "
        f"got {type(registry).__name__}"
    )


def _flags(**flags: object) -> dict[str, bool]:
    """Options that are True or False (a string such as ``"false"`` would count as true)."""
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise InvalidArgumentError(f"{name} must be True or False, got {value!r}")
    return {name: bool(value) for name, value in flags.items()}


def _diagnostics(value: object) -> dict[str, Any] | None:
    if value is not None and not isinstance(value, dict):
        raise InvalidArgumentError(f"jit_diagnostics must be None or a dict to fill, got {type(value).__name__}")
    return value


def _pipeline(passes: object, pass_registry: object, target: Target, frontend: Frontend,
              axes: Mapping[str, Mapping[int, str]], dump: DumpFn | None, *, verify_ir: bool,
              fold_batch_norm: bool, strict_dynamic_axes: bool, **_: bool) -> PassManager:
    """The passes ``compile`` runs: the spec and the user's named passes assembled with the
    built-in ones and the target's own; the f32-forcing passes only for a target whose
    casts set a precision."""
    if isinstance(passes, Mapping):
        raise InvalidArgumentError(
            f"passes must be a pipeline string or a list of names and t2n.Pass objects, got {passes!r}; "
            "give passes by name in pass_registry={name: pass}"
        )
    builtins = builtin_passes(bf16_as=target.bf16_as, dynamic_axes={} if frontend.makes_axes_symbolic else axes,
                              strict_dynamic_axes=strict_dynamic_axes, verify_each=verify_ir, dump=dump)
    pipeline = compile_pipeline(passes, registry=check_pass_registry(pass_registry), builtins=builtins,
                                fold_batch_norm=fold_batch_norm, verify_each=verify_ir, dump=dump,
                                force_f32=target.forced_f32_passes(), target_passes=target.passes(),
                                lowering_passes=target.lowering_passes())
    check_forcing_target(pipeline, target=str(target), allowed=target.casts_set_precision)
    return pipeline


def _ir_dumper(folder: object) -> DumpFn | None:
    """``dump_ir``: each stage's IR text into ``folder`` (made when the first is written)."""
    if folder is None:
        return None
    if not isinstance(folder, (str, os.PathLike)):
        raise InvalidArgumentError(f"dump_ir must be None or a folder's path, got {type(folder).__name__} {folder!r}")
    root = Path(folder)

    def dump(label: str, graph: Graph) -> None:
        root.mkdir(parents=True, exist_ok=True)
        (root / f"{label}.ir").write_text(print_graph(graph, with_locs=True))

    return dump


def merge_dynamic_axes(
    target: Target, given: Mapping[str, Mapping[int, str]] | None
) -> dict[str, dict[int, str]]:
    """The dynamic axes of the compile call and of the target, merged (they must agree,
    and the target must have symbolic dimensions)."""
    merged: dict[str, dict[int, str]] = {}
    for source in (target.dynamic_axes, given):
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


def check_target(target: object) -> Target:
    """``target``: a :class:`Target`, or ``None`` for the latest ``TractNNEF``."""
    target = target if target is not None else TractNNEF()
    if not isinstance(target, Target):
        raise InvalidArgumentError(
            f"target must be t2n.TractNNEF(...), t2n.KhronosNNEF(...) or another t2n.Target, got {target!r}"
        )
    return target


def resolve_check(target: Target, check_io: object, tolerance: object,
                  *, default: bool) -> tuple[bool, Tolerance]:
    """(whether to run the engine, at which tolerance) for a call on ``target``.

    ``check_io`` given to the call (``compile``/``export``) wins; else the target's own
    ``check_io`` (``TractNNEF(check_io=True)``); else the entry point's ``default``:
    ``compile`` and ``export`` do not run the engine, ``export_model_to_nnef`` does. The
    tolerance follows the same order: the call's, else the target's
    ``check_io_tolerance``, else ``approximate``."""
    if check_io is None:
        check_io = target.check_io if target.check_io is not None else default
    if not isinstance(check_io, bool):
        raise InvalidArgumentError(f"check_io must be True or False (or None: the target decides), got {check_io!r}")
    if tolerance is None:
        tolerance = target.check_io_tolerance or Tolerance.APPROXIMATE
    return check_io, Tolerance.parse(tolerance)


def check_log_level(level: object) -> int | None:
    """``None``, a ``logging`` level number, or a level name in any case (``"debug"``)."""
    if level is None:
        return None
    if isinstance(level, int) and not isinstance(level, bool) and level >= 0:
        return level
    if isinstance(level, str):
        number = logging.getLevelNamesMapping().get(level.strip().upper())
        if number is not None:
            return number
    levels = logging.getLevelNamesMapping()
    names = ", ".join(sorted(levels, key=lambda n: levels[n]))
    raise InvalidArgumentError(f"log_level must be None, a logging level number or one of {names}; got {level!r}")


def check_symbols_apart(axes: Mapping[str, Mapping[int, str]], names: Sequence[str]) -> None:
    """A dynamic-axes symbol and an input or output cannot share a name in graph.nnef."""
    for inp, by_axis in axes.items():
        for axis, sym in by_axis.items():
            if sym in names:
                raise DynamicAxesError(
                    f"dynamic_axes[{inp!r}][{axis}]: symbol {sym!r} is also the name of an "
                    "input or output; graph.nnef needs them apart, so rename one of them"
                )



def check_bundle_path(path: object) -> Path | None:
    """``debug_bundle_path``: None, or a str / path (a folder, or a ``.tgz``/``.tar``)."""
    if path is None:
        return None
    if isinstance(path, (str, os.PathLike)) and str(os.fspath(path)).strip():
        from t2n.check.bundle import check_bundle_destination

        check_bundle_destination(Path(path))
        return Path(path)
    raise InvalidArgumentError(
        f"debug_bundle_path must be None or a path (a folder, or a .tgz/.tar archive), got {path!r}"
    )


def check_op_set(op_set: object) -> OpSet | None:
    """``compile(op_set=...)``: ``None`` (the built-in ops) or an :class:`OpSet`."""
    if op_set is None or isinstance(op_set, OpSet):
        return op_set
    hint = (" (an OpTable is one family of ops: pass OpSet.default().extended(table))"
            if isinstance(op_set, OpTable) else "")
    raise InvalidArgumentError(
        f"op_set must be a t2n.ir.OpSet such as OpSet.default().extended([...]), got "
        f"{type(op_set).__name__}{hint}"
    )
