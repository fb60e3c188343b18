"""Checking the arguments of ``compile`` and ``export`` before any work is done.

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
from t2n.check.compare import Tolerance
from t2n.errors import DynamicAxesError, InvalidArgumentError, T2NError
from t2n.frontend.io import check_given_names
from t2n.ir import OpSet, OpTable
from t2n.passes.dynamic_axes import dynamic_axes_form
from t2n.passes.pipeline import check_pass_registry, compile_pipeline
from t2n.passes.precision import check_forcing_target, forced_pass_names


@attrs.frozen
class CompileOptions:
    """The checked form of the options ``compile`` acts on."""

    tolerance: Tolerance
    log_level: int | None
    dynamic_axes: dict[str, dict[int, str]]
    """Those of the call and of the target, merged (:func:`merge_dynamic_axes`)."""
    custom_extensions: tuple[str, ...]
    naming_scheme: str = "natural_verbose"
    debug_bundle_path: Path | None = None


def merge_dynamic_axes(
    target: Target, given: Mapping[str, Mapping[int, str]] | None
) -> dict[str, dict[int, str]]:
    """The dynamic axes of the compile call and of the target, merged (they must agree,
    and the target must have symbolic dimensions)."""
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


def check_target(target: object) -> Target:
    from t2n.backends.tract.target import TractNNEF

    target = target if target is not None else TractNNEF()
    if not isinstance(target, Target):
        raise InvalidArgumentError(
            f"target must be t2n.TractNNEF(...), t2n.KhronosNNEF(...) or another t2n.Target, got {target!r}"
        )
    return target


def check_compile_options(
    target: Target, *, input_names: object, output_names: object, passes: object,
    tolerance: object, log_level: object, dynamic_axes: object, custom_extensions: object,
    flags: Mapping[str, object] | None = None, kwargs: object = None, pass_registry: object = None,
    naming_scheme: object = "natural_verbose", debug_bundle_path: object = None,
) -> CompileOptions:
    """Every option of ``compile`` that can be checked without the model (``flags``:
    the options that must be True or False, by name)."""
    check_flags(flags or {})
    if kwargs is not None and (not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs)):
        raise InvalidArgumentError(f"kwargs must be a dict of keyword arguments (name → value), got {kwargs!r}")
    names = {what: check_given_names(given, what, rules=target.identifier_rules)
             for what, given in (("input", input_names), ("output", output_names)) if given is not None}
    if len(names) == 2:
        from t2n.backends.khronos.target import KhronosNNEF
        from t2n.frontend.io_match import same_names

        same_names(names["input"], names["output"], allow=bool((flags or {}).get("allow_same_io_names")),
                   khronos=isinstance(target, KhronosNNEF))
    _check_passes(passes, pass_registry, target)
    axes = merge_dynamic_axes(target, dynamic_axes_form(dynamic_axes))
    return CompileOptions(
        tolerance=Tolerance.parse(tolerance),
        log_level=check_log_level(log_level),
        dynamic_axes=axes,
        custom_extensions=check_custom_extensions(custom_extensions, allowed=target.accepts_extension_lines),
        naming_scheme=check_naming_scheme(naming_scheme),
        debug_bundle_path=check_bundle_path(debug_bundle_path),
    )


def resolve_check(target: Target, check_io: object, tolerance: object,
                  *, default: bool) -> tuple[bool, Tolerance]:
    """(whether to run the engine, at which tolerance) for a call on ``target``.

    ``check_io`` given to the call (``compile``/``export``) wins; else the target's own
    ``check_io`` (``TractNNEF(check_io=True)``); else the entry point's ``default``:
    ``compile`` and ``export`` do not run the engine, ``export_model_to_nnef`` does. The
    tolerance follows the same order: the call's, else the target's
    ``check_io_tolerance``, else ``approximate``."""
    own = getattr(target, "check_io", None)
    if check_io is None:
        check_io = own if own is not None else default
    if not isinstance(check_io, bool):
        raise InvalidArgumentError(f"check_io must be True or False (or None: the target decides), got {check_io!r}")
    if tolerance is None:
        tolerance = getattr(target, "check_io_tolerance", None) or Tolerance.APPROXIMATE
    return check_io, Tolerance.parse(tolerance)


def check_flags(flags: Mapping[str, object]) -> None:
    """Options that are True or False (a string such as ``"false"`` would count as true)."""
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise InvalidArgumentError(f"{name} must be True or False, got {value!r}")


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


def _check_passes(passes: object, pass_registry: object, target: Target) -> None:
    """The pipeline spec and the user's named passes, assembled once (nothing runs); the
    f32-forcing passes only for a target whose casts set a precision."""
    if isinstance(passes, Mapping):
        raise InvalidArgumentError(
            f"passes must be a pipeline string or a list of names and t2n.Pass objects, got {passes!r}; "
            "give passes by name in pass_registry={name: pass}"
        )
    pipeline = compile_pipeline(passes, registry=check_pass_registry(pass_registry),
                                force_f32=forced_pass_names(target))
    check_forcing_target(pipeline, target=str(target), allowed=isinstance(target, TractNNEF))


def check_symbols_apart(axes: Mapping[str, Mapping[int, str]], names: Sequence[str]) -> None:
    """A dynamic-axes symbol and an input or output cannot share a name in graph.nnef."""
    for inp, by_axis in axes.items():
        for axis, sym in by_axis.items():
            if sym in names:
                raise DynamicAxesError(
                    f"dynamic_axes[{inp!r}][{axis}]: symbol {sym!r} is also the name of an "
                    "input or output; graph.nnef needs them apart, so rename one of them"
                )



_CHECKED_DEFAULTS: dict[str, Any] = {
    "input_names": None, "output_names": None, "passes": (), "pass_registry": None, "log_level": None,
    "dynamic_axes": None, "custom_extensions": (),
}


_FLAGS = ("verify_ir", "strict_dynamic_axes", "auto_harden_jit", "fold_batch_norm", "strict",
          "check_io_names_qte_match", "allow_same_io_names")


def check_export_options(target: object, tolerance: object, options: Mapping[str, Any], *,
                         path: object, flags: Mapping[str, object], keywords: Sequence[str],
                         progress: object = None) -> Target:
    """``export``'s own arguments and the ``compile`` options it passes on (``keywords``:
    those ``compile`` takes), checked before the destination is touched."""
    unknown = sorted(set(options) - set(keywords))
    if unknown:
        raise InvalidArgumentError(
            f"export() got unknown option(s) {', '.join(map(repr, unknown))}; the options it "
            f"passes to compile are: {', '.join(keywords)}"
        )
    if progress is not None and not isinstance(progress, bool):
        raise InvalidArgumentError(f"progress must be None, True or False, got {progress!r}")
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidArgumentError(f"path must be a str or a path, got {type(path).__name__} {path!r}")
    checked = check_target(target)
    own = {**flags, **{n: options[n] for n in _FLAGS if n in options}}
    check_compile_options(checked, tolerance=tolerance, flags=own, kwargs=options.get("kwargs"),
                          naming_scheme=options.get("nnef_variable_naming_scheme", "natural_verbose"),
                          debug_bundle_path=options.get("debug_bundle_path"),
                          **{n: options.get(n, default) for n, default in _CHECKED_DEFAULTS.items()})
    return checked


def confirm_rendered_names(input_ids: Sequence[str], output_ids: Sequence[str],
                           input_names: Sequence[str], output_names: Sequence[str]) -> None:
    """The last guard of the naming rule: graph.nnef names its inputs and outputs exactly
    as the artifact reports them (a difference is a t2n bug, never silently shipped)."""
    if list(input_ids) != list(input_names) or list(output_ids) != list(output_names):
        raise T2NError(
            f"internal error: graph.nnef names the inputs {list(input_ids)} and outputs "
            f"{list(output_ids)}, but the artifact would report {list(input_names)} and "
            f"{list(output_names)}; please report this with the model"
        )


def check_bundle_path(path: object) -> Path | None:
    """``debug_bundle_path``: None, or a str / path (a folder, or a ``.tgz``/``.tar``)."""
    if path is None:
        return None
    if isinstance(path, (str, os.PathLike)) and str(os.fspath(path)).strip():
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
