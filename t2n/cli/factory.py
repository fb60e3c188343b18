"""What ``t2n export SPEC`` exports: a model and its example inputs, from a Python
factory or a TorchScript file.

The contract of ``SPEC``:

* ``MODULE:FACTORY``: ``MODULE`` is a dotted module name importable from the current
  folder (it comes first on ``sys.path``, as with ``python -m``), or the path of a
  ``.py`` file (its folder then comes first on ``sys.path``, so it may import its
  neighbours). ``FACTORY`` names a callable in it (``build`` or ``Models.build``).
  It is called with the ``--factory-arg NAME=VALUE`` pairs as keyword arguments
  (strings), and returns ``(model, args)`` or ``(model, args, kwargs)``: ``model`` a
  ``torch.nn.Module`` (or ScriptModule), ``args`` one tensor or a tuple/list of
  positional arguments (nested tuples, lists and dicts of tensors are fine),
  ``kwargs`` a dict of keyword arguments; exactly what ``t2n.compile`` takes.
  The model is exported in eval mode, as ``t2n.compile`` exports every model (one in
  training mode gives a ``TrainingModeWarning``; call ``.eval()`` in the factory).
* ``FILE`` (no ``:``; any existing file, usually ``.pt``): a TorchScript module saved
  with ``torch.jit.save``, loaded with ``torch.jit.load`` on the CPU; its example
  inputs are made from ``--input-shape`` (one per input, in order) and
  ``--input-dtype`` (one per input, default float32): floats uniform in [0, 1) from
  a generator seeded with 0, integers and booleans zero.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import click

from t2n.errors import InvalidArgumentError


@attrs.frozen
class ModelSource:
    """The model, positional args and keyword args to export, and where they came from."""

    model: Any
    args: Any
    kwargs: dict[str, Any] | None
    origin: str


def is_factory_spec(spec: str) -> bool:
    """A spec naming a factory (``MODULE:FACTORY``) rather than a TorchScript file."""
    return ":" in spec and not Path(spec).is_file()


def split_spec(spec: str) -> tuple[str, str]:
    """``(module or file, factory name)``; a malformed spec is a usage error."""
    module, _, name = spec.rpartition(":")
    form = ("write it as MODULE:FACTORY (a dotted module importable from the current folder), "
            "FILE.py:FACTORY, or the path of a TorchScript file")
    if not module.strip() or not name.strip():
        raise click.BadParameter(f"{spec!r}: the module and the factory must both be given: {form}",
                                 param_hint="SPEC")
    if not all(part.isidentifier() for part in name.split(".")):
        raise click.BadParameter(f"{spec!r}: factory {name!r} is not a Python name: {form}", param_hint="SPEC")
    return module, name


def _is_file_module(module: str) -> bool:
    return module.endswith(".py") or "/" in module or "\\" in module


def import_module(module: str) -> Any:
    """Import ``module`` (a dotted name or a ``.py`` path). A module that does not exist
    is a usage error; one that fails while importing is the user's code failing."""
    if _is_file_module(module):
        path = Path(module)
        if not path.is_file():
            raise click.BadParameter(
                f"{module!r} is not a file; give the path of a .py file that defines the factory",
                param_hint="SPEC")
        path = path.resolve()
        digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
        name = f"_t2n_factory_{path.stem}_{digest}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise click.BadParameter(f"{module!r} cannot be imported as a Python file", param_hint="SPEC")
        sys.path.insert(0, str(path.parent))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module.startswith(exc.name) and module[len(exc.name):][:1] in ("", "."):
            raise click.BadParameter(
                f"no module named {module!r} (looked in the current folder {Path.cwd()} and on "
                "sys.path); give a dotted module name importable from here, or FILE.py:FACTORY",
                param_hint="SPEC") from exc
        raise


def load_factory(spec: str, factory_kwargs: Mapping[str, str]) -> ModelSource:
    """Import the factory ``spec`` names, call it and check what it returns."""
    module_name, attr = split_spec(spec)
    module = import_module(module_name)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            found = sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n)))
            raise click.BadParameter(
                f"{module_name!r} has no attribute {attr!r}; callables defined there: "
                f"{', '.join(found[:20]) or 'none'}", param_hint="SPEC")
        obj = getattr(obj, part)
    if not callable(obj):
        raise click.BadParameter(
            f"{spec!r} is {_a(obj)}, not a callable; FACTORY must be a function "
            "returning (model, example_inputs)", param_hint="SPEC")
    result = obj(**factory_kwargs)
    return check_factory_result(result, spec)


def check_factory_result(result: Any, spec: str) -> ModelSource:
    """``(model, args)`` or ``(model, args, kwargs)`` with a torch module first.

    torch is not imported here: if the factory's code never loaded it, what it returned
    cannot be a torch module (and the error comes without torch's start-up time)."""
    what = ("it must return (model, example_inputs) or (model, example_inputs, kwargs): a "
            "torch.nn.Module, then one tensor or a tuple of positional arguments, then an "
            "optional dict of keyword arguments")
    if not isinstance(result, (tuple, list)) or len(result) not in (2, 3):
        size = f" of {len(result)} items" if isinstance(result, (tuple, list)) else ""
        raise InvalidArgumentError(f"the factory {spec} returned {_a(result)}{size}; {what}")
    model, args = result[0], result[1]
    kwargs = result[2] if len(result) == 3 else None
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(model, torch.nn.Module):
        raise InvalidArgumentError(
            f"the factory {spec} returned {_a(model)} as the model (first item); {what}")
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise InvalidArgumentError(
            f"the factory {spec} returned {_a(kwargs)} as keyword arguments (third item); {what}")
    if isinstance(args, list):
        args = tuple(args)
    return ModelSource(model, args, dict(kwargs) if kwargs is not None else None, spec)


def _a(obj: object) -> str:
    name = type(obj).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def load_torchscript(path: Path, shapes: Sequence[tuple[int, ...]], dtypes: Sequence[str]) -> ModelSource:
    """A TorchScript file and example inputs of the given shapes and dtypes."""
    if not shapes:
        raise click.UsageError(
            f"{path} is a TorchScript file: give its example inputs' shapes with --input-shape "
            "(one per input, in order, e.g. --input-shape 1,3,224,224), and --input-dtype if not float32")
    if dtypes and len(dtypes) != len(shapes):
        raise click.UsageError(
            f"{len(shapes)} --input-shape but {len(dtypes)} --input-dtype: give one --input-dtype "
            "per input (in the same order), or none for float32 everywhere")
    import torch

    from t2n.serialize.zip_crc import check_zip_crcs

    if zipfile.is_zipfile(path):
        check_zip_crcs(path, "TorchScript file (torch.jit.save)")  # torch.jit.load does not
    try:
        model = torch.jit.load(str(path), map_location="cpu")  # type: ignore[no-untyped-call]
    except (RuntimeError, ValueError, OSError) as exc:
        raise InvalidArgumentError(
            f"cannot load {path} as TorchScript ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}). "
            "What to do: give a file written with torch.jit.save (torch.jit.trace or script), "
            "or a Python factory as MODULE:FACTORY") from exc
    gen = torch.Generator().manual_seed(0)
    args = tuple(_example(shape, dtype, gen) for shape, dtype in zip(shapes, dtypes or ["float32"] * len(shapes)))
    return ModelSource(model.eval(), args, None, str(path))


def _example(shape: tuple[int, ...], dtype: str, gen: Any) -> Any:
    import torch

    dt = getattr(torch, dtype)
    if dt.is_floating_point:
        return torch.rand(shape, generator=gen).to(dt)
    return torch.zeros(shape, dtype=dt)


def load_source(spec: str, *, shapes: Sequence[tuple[int, ...]], dtypes: Sequence[str],
                factory_kwargs: Mapping[str, str]) -> ModelSource:
    """The model and inputs ``t2n export SPEC`` means (see the module docstring)."""
    if is_factory_spec(spec):
        if shapes or dtypes:
            raise click.UsageError(
                "--input-shape/--input-dtype are for TorchScript files; a factory returns its own "
                "example inputs")
        return load_factory(spec, factory_kwargs)
    path = Path(spec)
    if not path.is_file():
        hint = ("; a .py file needs the factory's name: FILE.py:FACTORY" if path.suffix == ".py"
                else "; give MODULE:FACTORY, FILE.py:FACTORY or the path of a TorchScript file")
        raise click.BadParameter(f"{spec!r} is not a file{hint}", param_hint="SPEC")
    if path.suffix == ".py":
        raise click.BadParameter(
            f"{spec!r} is a Python file: name the factory in it as {spec}:FACTORY", param_hint="SPEC")
    if factory_kwargs:
        raise click.UsageError("--factory-arg is for factories (MODULE:FACTORY), not TorchScript files")
    return load_torchscript(path, shapes, dtypes)
