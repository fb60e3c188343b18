"""``t2n.compile`` and ``t2n.export``, the two entry points: their options, checked
before anything runs, and the steps of :mod:`t2n.driver` in order (trace or script →
lower → passes → render, with PyTorch's reference outputs kept for ``Artifact.check``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from t2n.artifact import Artifact
from t2n.backends.target import Target
from t2n.check.compare import Tolerance
from t2n.driver.compile import compile_model
from t2n.driver.early_write import parameter_paths, planned_tensors
from t2n.driver.export import export_model
from t2n.frontend.base import Frontend
from t2n.frontend.extractors import ModuleExtractor
from t2n.frontend.registry import LoweringRegistry
from t2n.ir import OpSet
from t2n.options import (
    compile_options,
    compile_options_from,
    keywords_of,
    merge_dynamic_axes,
    write_options,
)
from t2n.passes.base import Pass
from t2n.passes.spec import PipelineSpec

__all__ = ["compile", "export", "merge_dynamic_axes", "parameter_paths", "planned_tensors"]


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
    frontend: str | Frontend = "jit",
    dynamic_shapes: Any = None,
    remodel: Any = None,
    sampling: str = "refuse",
) -> Artifact:
    """Export ``model`` called on ``args`` (and ``kwargs``) for ``target``.

    Every option is checked, once, before the model is traced, into one
    :class:`t2n.options.CompileOptions` that the stages share: a typo in ``tolerance``
    does not wait for the trace or the engine. Inputs and outputs may be tensors nested
    in tuples, lists and dicts; they are flattened depth-first (dicts in insertion order)
    and named ``input_0``, ``attention_mask``, ``logits``… unless names are given. The
    model is traced in eval mode (one in training mode gives a ``TrainingModeWarning``;
    its flags are restored after). An output that is not a tensor (a string, a number) is
    left out with a ``NonTensorOutputWarning`` (``None`` silently); an output that
    returns an input unchanged is written as a ``copy`` under the output's own name.

    Where ``forward`` turns a tensor computed from the inputs' data into a Python value
    (``if x.sum() > 0:``, ``.item()``, ``int(t)``, ``t.tolist()``, ``torch.tensor`` of
    tensors), the trace keeps the example's value: each such place gives a
    ``t2n.SpecializedTraceWarning`` naming its source line and module. The traced graph
    is run once on the example inputs: where it does not compute what ``forward``
    returned (a write through a NumPy view the tracer dropped), a ``t2n.UntracedEffectWarning``
    names the output. Weights holding
    NaN or infinite values (or values beyond f16's range written as f16) give a
    ``t2n.NonFiniteWeightWarning`` naming each tensor. A forward that writes its own
    parameters or buffers is exported as PyTorch ran that call (the writes start from the
    values before it), or refused with ``StateMutationError``. The artifact keeps
    references to the model's weights: changing them after ``compile`` makes
    ``save``/``check`` raise ``WeightsChangedError`` (compile again). Custom
    ``torch.autograd.Function``s are exported as the ops their ``forward`` runs, and
    ``torch.library`` custom ops as one node that a rule in ``registry`` lowers.

    Args:
        model: a ``torch.nn.Module``, a ``torch.jit.ScriptModule`` (scripted, or loaded
            with ``torch.jit.load``), or with ``frontend="export"`` a
            ``torch.export.ExportedProgram``.
        args: the example positional arguments (a tuple; a single tensor is taken as one
            argument). Arguments that are not tensors are baked in as constants.
        target: ``t2n.TractNNEF(version)`` (the default: the latest tested tract) or
            ``t2n.KhronosNNEF("1.0.5")``, or a ``Target`` of your own.
        kwargs: example keyword arguments of ``forward``; tensors become inputs named by
            their keyword.
        input_names: the inputs' names in graph.nnef, in flattened order. Used exactly
            or refused with an ``InvalidArgumentError``: ASCII letters, digits and ``_``,
            not starting with a digit, not an NNEF keyword, on tract not starting with
            ``true``, ``false`` or ``inf``; all names differ from each other and from the
            ``dynamic_axes`` symbols. Derived names are made valid instead (``my key`` →
            ``my_key``) with a logged warning.
        output_names: the outputs' names, in flattened order, under the same rules.
        passes: ``t2n.Pass`` objects run after the built-in passes (then cleaned up
            after), or a pipeline spec by name such as ``"default,-fold-batch-norm,
            +my-pass@after:fold-batch-norm"``, or a list mixing names and ``Pass``
            objects (see :mod:`t2n.passes.spec`).
        pass_registry: names for your passes in a spec: ``{"my-pass": MyPass()}``.
        registry: the lowering rules from aten ops to IR ops (``None``: the built-in
            ones; ``LoweringRegistry.default().extended(rules)`` to add or replace).
        op_set: the IR ops rules may create (``OpSet.default().extended(table)``);
            emitters for new IR ops go to the target (``TractNNEF().with_emitters(...)``).
        extractors: ``[t2n.ModuleExtractor(MyBlock, lower=fn)]`` exports every
            ``MyBlock`` as ``fn(ctx, module, *args, **kwargs)`` builds it, without
            tracing its ``forward`` (see :mod:`t2n.frontend.extractors`). With the jit
            frontend, t2n adds one by itself for each class of transformers' experts
            interface these do not claim (one ``moe_experts`` op, tract's fused
            mixture-of-experts operator).
        check_io: run the artifact in the target's engine when it is made and raise
            ``CheckMismatchError`` if it differs from PyTorch (``None``: the target's
            ``check_io``, else no).
        tolerance: the comparison's tolerance: tract's levels ``exact``, ``close``,
            ``approximate``, ``very``, ``super``, ``ultra``, t2n's ``loose``,
            ``very_loose``, or a ``Tolerance`` (``None``: the target's
            ``check_io_tolerance``, else ``approximate``).
        log_level: the ``t2n`` logger's level during the call (a ``logging`` level or
            its name).
        verify_ir: verify the IR after every pass (types, shapes, SSA form).
        dump_ir: a folder where the IR is written after lowering and after every pass
            that changed it.
        dynamic_axes: ``{"inp": {1: "S"}}`` makes axis 1 of input ``inp`` the symbol
            ``S`` (tract only; also ``TractNNEF(dynamic_axes=...)``); every size computed
            from it stays in the graph. The list form ``{"inp": [1]}`` names the symbol
            ``inp_dim1``. Unknown names, axes out of range and bad symbols raise
            ``DynamicAxesError``.
        custom_extensions: extra ``extension`` lines such as
            ``"tract_assert S + P <= 4096"`` (one line each, without ``;``, ``#`` or line
            breaks).
        strict_dynamic_axes: raise ``DynamicAxesError`` where a size the trace baked in
            should follow a symbol (by default a ``t2n.BakedSizeWarning`` names the op
            and module path).
        auto_harden_jit: specialise a ``ScriptModule``'s graph for the example inputs
            first (see ``t2n.harden_jit_for_export``).
        jit_diagnostics: a dict that receives the change counts of each hardening step.
        fold_batch_norm: fold batch norms into the conv/linear layers before them (exact
            and safe cases only); ``False`` is the same as ``-fold-batch-norm`` in a
            pipeline spec.
        weights_from: a ``.safetensors`` file, sharded checkpoint, ``.pt``/``.bin``
            file or a mapping name → tensor that supplies parameters by name, read from
            disk only when the artifact is saved: a model built on the meta device is
            exported without its weights ever in memory (it then has no PyTorch reference
            outputs; check it with ``artifact.check(inputs=..., expected=...)``).
        strict: raise ``SpecializedTraceError`` (listing every place) instead of the
            ``SpecializedTraceWarning``, ``UntracedEffectError`` instead of the
            ``UntracedEffectWarning``, and ``NonFiniteWeightError`` instead of the
            ``NonFiniteWeightWarning``.
        nnef_variable_naming_scheme: how graph.nnef names its tensors:
            ``"natural_verbose"`` (module path and op, ``encoder_0_fc1_matmul``),
            ``"natural_verbose_camel"``, ``"raw"`` (the trace's names) or ``"numeric"``
            (see :mod:`t2n.backends.nnef.naming`).
        check_io_names_qte_match: refuse names that name something the trace did not keep
            as a tensor (``None``, an int) with ``IONamesMismatchError``; ``False`` drops
            such names.
        allow_same_io_names: let an output returning an input unchanged carry that
            input's name (tract only).
        debug_bundle_path: where a failed check (``check_io`` or a later
            ``artifact.check()``) writes its debug bundle: a folder, or one archive for a
            ``.tgz``/``.tar`` path, with the IR after every pass and a ``replay.py``;
            nothing is written when the check passes.
        frontend: ``"jit"`` (``torch.jit.trace``, the default), ``"export"``
            (``torch.export``; what it refuses is an ``ExportFrontendError``), or a
            :class:`t2n.frontend.base.Frontend` object of your own.
        dynamic_shapes: with ``frontend="export"``, dynamic sizes in torch.export's form
            (``torch.export.Dim("S", max=4096)``), instead of ``dynamic_axes``.
        remodel: a remodel plan (a mapping, ``t2n.RemodelPlan`` or the path of a
            YAML/JSON file) that reshapes the artifact's interface after the passes:
            collapse size-1 axes, bind a scalar input to an axis size, fix or rename
            symbols, keep some outputs (see ``docs/remodeler.md``). Its ``original_shape``
            symbols are dynamic axes and its ``eval_symbols`` the example inputs' sizes;
            ``check_io`` compares the remodelled artifact with PyTorch on the inputs
            reshaped to match. A plan that does not fit raises ``RemodelPlanError``.
        sampling: what becomes of random draws inside ``forward`` (``torch.randn``,
            ``rand``, ``randn_like``, ``normal``, ``x.normal_()``...), which no artifact can
            reproduce: ``"refuse"`` (the default) raises ``SamplingOpsError`` naming each;
            ``"inputs"`` makes each draw a graph input after the model's (``noise_0``,
            ``noise_1``... in graph order, described in ``artifact.stats["noise_inputs"]``)
            that takes the values the op returns, so that the artifact computes PyTorch's
            numbers for the same noise (the draws PyTorch made while tracing are the
            example values ``check()`` uses). A noise input follows dynamic axes by itself
            (its sizes are those of the draw's ``size`` or of the tensor it is drawn like).
            A draw sized from tensor data is refused. See ``docs/sampling.md``.

    Returns:
        The :class:`t2n.Artifact`: ``save(path)``, ``check()``, ``ir``, ``input_names``,
        ``output_names``, ``stats``.

    Raises:
        InvalidArgumentError: an option is malformed (before anything runs).
        UnsupportedOpsError: ops without a rule, all listed with their module paths and
            source lines (``SamplingOpsError`` when they are all random draws).
        CheckMismatchError: ``check_io`` found outputs that differ from PyTorch.
    """
    # the keywords are t2n.options.CompileKeywords, spelled out above for the reader (a test
    # holds the two equal): every one of them is passed on, none named here again
    return compile_model(model, args, compile_options(target, **keywords_of(locals())))


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

    Args:
        model: as for :func:`compile`.
        args: as for :func:`compile`.
        path: a directory, or a ``.tar``/``.tgz`` archive (by suffix).
        target: as for :func:`compile`.
        compression_level: 0 to 9; ``None``: by the suffix (a ``.tgz`` is compressed).
        sync: fsync the artifact before it is renamed into place.
        progress: a progress bar (``None``: on a terminal only) and INFO log records.
        overlap: write the parameters while the model compiles (``False``: compile,
            then write).
        check_io: as for :func:`compile`, run on the saved artifact.
        tolerance: as for :func:`compile`.
        overwrite: replace what is at ``path`` even if t2n did not write it.
        nnef_variable_naming_scheme: as for :func:`compile`.
        check_io_names_qte_match: as for :func:`compile`.
        allow_same_io_names: as for :func:`compile`.
        debug_bundle_path: as for :func:`compile`.
        **options: any other keyword of :func:`compile`.

    Returns:
        The saved :class:`t2n.Artifact`.
    """
    write = write_options(path, compression_level=compression_level, sync=sync, progress=progress,
                          overlap=overlap, overwrite=overwrite)
    checked = compile_options_from(target, {
        **options, "check_io": check_io, "tolerance": tolerance,
        "nnef_variable_naming_scheme": nnef_variable_naming_scheme,
        "check_io_names_qte_match": check_io_names_qte_match, "allow_same_io_names": allow_same_io_names,
        "debug_bundle_path": debug_bundle_path}, entry="export()")
    return export_model(model, args, write, checked)
