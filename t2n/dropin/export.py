"""``export_model_to_nnef``: the entry point of the widely used PyTorch → NNEF exporter,
with its keyword names and defaults, built on :func:`t2n.export` (the same compiler,
the same artifact bytes as ``t2n.compile(...).save(...)``).

Differences from :func:`t2n.export`: ``args`` as that exporter takes it, the path and
``compression_level`` rules of :mod:`t2n.dropin.paths` (default ``0``: an uncompressed
archive), the artifact's path as the result, and the engine check on by default
(``inference_target.check_io=False`` turns it off; see :func:`t2n.options.resolve_check`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from t2n.backends.target import Target
from t2n.driver.export import export_model
from t2n.dropin.paths import destination
from t2n.errors import InvalidArgumentError
from t2n.frontend.io import flatten
from t2n.frontend.prefix_names import PrefixNames, expand
from t2n.options import check_target, compile_options, write_options


def export_model_to_nnef(
    model: Any,
    args: Any,
    file_path_export: str | Path,
    inference_target: Target,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    compression_level: int | None = 0,
    log_level: int = logging.INFO,
    nnef_variable_naming_scheme: str = "natural_verbose",
    check_io_names_qte_match: bool = True,
    debug_bundle_path: str | Path | None = None,
    custom_extensions: Sequence[str] | None = None,
    allow_same_io_names: bool = False,
    auto_harden_jit: bool = True,
    frontend: str = "jit",
) -> Path:
    """Export ``model`` (a ``torch.nn.Module``) called on ``args`` (one tensor, or a tuple/list of them) for
    ``inference_target`` to ``file_path_export``; return the artifact's path.

    ``compression_level`` and the path's suffix choose the form (:mod:`t2n.dropin.paths`):
    ``model.nnef`` with ``None`` → the directory ``model.nnef``; with ``0`` (the default)
    → ``model.nnef.tar``; with ``1..9`` → ``model.nnef.tgz``. A path ending in
    ``.tgz``/``.tar.gz``/``.tar`` is the archive itself. After writing, the artifact
    is run in the target's engine and compared with PyTorch unless
    ``inference_target.check_io`` is ``False`` or the target has no engine (a
    ``t2n.Target`` of your own without ``run()``), at its ``check_io_tolerance``; a
    mismatch raises ``CheckMismatchError`` and the artifact stays on disk for study.
    Every argument is checked before the model is traced or anything is written.
    ``input_names``/``output_names`` name the forward's arguments and top-level outputs as
    that exporter does: a tensor nested in a tuple, dict or dataclass argument is named
    ``<name>_<position or key>``, a name given for a non-tensor argument is dropped (see
    :mod:`t2n.frontend.prefix_names` and docs/migrating.md).
    ``frontend="export"`` reads the model with ``torch.export`` (see ``t2n.compile``).
    """
    target = _checked_target(inference_target)
    path, level = destination(file_path_export, compression_level)
    from t2n.frontend.io import normalize_args  # one tensor → (tensor,)

    args = normalize_args(args)
    extensions = _extension_lines(custom_extensions)
    runs = type(target).run is not Target.run
    options = compile_options(
        target, default_check_io=runs, input_names=_flat_input_names(input_names, args),
        output_names=PrefixNames(_names_list(output_names, "output")),
        log_level=log_level, custom_extensions=extensions,
        auto_harden_jit=auto_harden_jit, nnef_variable_naming_scheme=nnef_variable_naming_scheme,
        check_io_names_qte_match=check_io_names_qte_match, allow_same_io_names=allow_same_io_names,
        debug_bundle_path=debug_bundle_path, frontend=frontend,
    )
    _check_runnable(target, runs, options.check_io)
    export_model(model, args, write_options(path, compression_level=level), options)
    return path


def _extension_lines(custom_extensions: Sequence[str] | None) -> tuple[str, ...]:
    """That exporter's ``custom_extensions`` as a tuple of lines; one string is refused
    rather than read as a list of one-character lines."""
    if custom_extensions is not None and (isinstance(custom_extensions, str)
                                          or not isinstance(custom_extensions, (list, tuple, set))):
        raise InvalidArgumentError(
            f"custom_extensions must be a list of extension lines such as ['tract_assert S >= 1'], "
            f"got {custom_extensions!r}"
        )
    return tuple(custom_extensions or ())


def _check_runnable(target: Target, runs: bool, check_io: bool) -> None:
    """A target of the user's own without ``run()`` that still asks for ``check_io`` is
    refused before tracing, not after the artifact is written."""
    if not runs and check_io:
        raise InvalidArgumentError(
            f"inference_target {target} asks for check_io but cannot run an artifact (its class "
            "defines no run()); define run() or pass check_io=False"
        )


def _names_list(names: object, what: str) -> list[str]:
    if names is None:
        return []
    if isinstance(names, (str, bytes)) or not isinstance(names, Iterable):
        raise InvalidArgumentError(f"{what}_names must be a list of strings, got {type(names).__name__} {names!r}")
    out = list(names)
    dup = next((n for n in out if out.count(n) > 1), None)
    if dup is not None:
        raise InvalidArgumentError(f"{what} names must be unique, but {dup!r} is given twice in {out}")
    return out


def _flat_input_names(names: Sequence[str] | None, args: tuple[Any, ...]) -> list[str] | None:
    """One name per input tensor from names given per argument (see
    :mod:`t2n.frontend.prefix_names`): settled before the trace, so that ``dynamic_axes``
    can name ``tup_0``."""
    if names is None:
        return None
    return expand(_names_list(names, "input"), flatten((args, {}))[2], "input")


def _checked_target(target: object) -> Target:
    if target is None:
        raise InvalidArgumentError(
            "inference_target is required: pass t2n.TractNNEF.latest(), t2n.TractNNEF('0.23.9') "
            "or t2n.KhronosNNEF('1.0.5')"
        )
    if isinstance(target, type) and issubclass(target, Target):
        raise InvalidArgumentError(
            f"inference_target is the class {target.__name__}, not a target: write {target.__name__}.latest() "
            f"or {target.__name__}('<version>')"
        )
    return check_target(target)
