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
from t2n.options import compile_options, compile_options_from, merge_dynamic_axes, write_options
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
    else ``approximate``; see :func:`t2n.options.resolve_check`); ``verify_ir`` checks the IR
    after every pass and ``dump_ir`` writes it to a folder after each change.

    ``dynamic_axes={"inp": {1: "S"}}`` makes axis 1 of input ``inp`` the symbol ``S``
    (tract only; also accepted as ``TractNNEF(dynamic_axes=...)``); every size computed
    from it stays in the graph. The list form ``{"inp": [1]}`` (as in ONNX export) names
    the symbol ``inp_dim1`` (``inp_dim_minus1`` for axis -1). Axes are ints: ``{"1": "S"}``
    is refused, as are unknown input names and axes out of range. ``custom_extensions``
    adds ``extension`` lines such as ``"tract_assert S + P <= 4096"`` (one line each,
    without ``;``, ``#`` or line breaks). Sizes baked into the trace that should follow
    a symbol give a ``t2n.BakedSizeWarning`` naming the op and module path, or a
    ``DynamicAxesError`` with ``strict_dynamic_axes=True``. Every option is checked, once,
    before the model is traced, into one :class:`t2n.options.CompileOptions` that the
    stages share: a typo in ``tolerance`` does not wait for the trace or the engine.

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
    all of them instead. Sizes, constants and parameters are not reported. Weights
    holding NaN or infinite values (or values beyond f16's range written as f16) give a
    ``t2n.NonFiniteWeightWarning`` naming each tensor and its counts; ``strict=True``
    raises ``NonFiniteWeightError`` instead. The model is traced in eval mode (one in
    training mode gives a ``TrainingModeWarning``; its flags are restored after), and an
    output that is not a tensor (a string, a number) is left out of the artifact with a
    ``NonTensorOutputWarning`` (``None`` silently). A forward
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
    ``frontend`` may also be a :class:`t2n.frontend.base.Frontend` object of your own.
    """
    options = compile_options(
        target, kwargs=kwargs, input_names=input_names, output_names=output_names, passes=passes,
        pass_registry=pass_registry, registry=registry, op_set=op_set, extractors=extractors, check_io=check_io,
        tolerance=tolerance, log_level=log_level, verify_ir=verify_ir, dump_ir=dump_ir, dynamic_axes=dynamic_axes,
        custom_extensions=custom_extensions, strict_dynamic_axes=strict_dynamic_axes,
        auto_harden_jit=auto_harden_jit, jit_diagnostics=jit_diagnostics, fold_batch_norm=fold_batch_norm,
        weights_from=weights_from, strict=strict, nnef_variable_naming_scheme=nnef_variable_naming_scheme,
        check_io_names_qte_match=check_io_names_qte_match, allow_same_io_names=allow_same_io_names,
        debug_bundle_path=debug_bundle_path, frontend=frontend, dynamic_shapes=dynamic_shapes)
    return compile_model(model, args, options)


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
    write = write_options(path, compression_level=compression_level, sync=sync, progress=progress,
                          overlap=overlap, overwrite=overwrite)
    checked = compile_options_from(target, {
        **options, "check_io": check_io, "tolerance": tolerance,
        "nnef_variable_naming_scheme": nnef_variable_naming_scheme,
        "check_io_names_qte_match": check_io_names_qte_match, "allow_same_io_names": allow_same_io_names,
        "debug_bundle_path": debug_bundle_path}, entry="export()")
    return export_model(model, args, write, checked)
