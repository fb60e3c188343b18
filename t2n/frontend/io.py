"""Flattening of model inputs and outputs.

Tensors nested in tuples, lists, dicts (including ``transformers`` ModelOutput,
which is an ordered dict) and dataclasses are flattened depth-first: sequences in
order, dicts in insertion order, dataclasses in field order. Anything that is not a tensor stays in the structure as a
constant. Names follow the path (``logits``, ``past_key_values.0.1``) unless the
user gives names.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import torch

from t2n.errors import InvalidArgumentError
from t2n.ir.identifiers import IdentifierRules

log = logging.getLogger("t2n")


@attrs.frozen
class Spec:
    """The structure around the tensors: rebuilds the object from flat tensors."""

    kind: str  # "leaf", "const", "tuple", "list", "dict", "mapping"
    children: tuple[Any, ...] = ()
    keys: tuple[Any, ...] = ()
    value: Any = None
    rebuild: Callable[..., Any] | None = attrs.field(default=None, eq=False)

    def unflatten(self, flat: Sequence[Any]) -> Any:
        if self.kind == "leaf":
            return flat[self.value]
        if self.kind == "const":
            return self.value
        items = [c.unflatten(flat) for c in self.children]
        if self.kind == "tuple":
            return self.rebuild(items) if self.rebuild else tuple(items)
        if self.kind == "list":
            return list(items)
        data = dict(zip(self.keys, items))
        return self.rebuild(data) if self.rebuild else data


def _positional(cls: type) -> Callable[[list[Any]], Any]:
    return lambda items: cls(*items)


def _keywords(cls: type) -> Callable[[dict[str, Any]], Any]:
    return lambda d: cls(**d)


def _fields_of(template: Any) -> Callable[[dict[str, Any]], Any]:
    """A copy of the dataclass ``template`` with its fields set (frozen ones too)."""

    def rebuild(values: dict[str, Any]) -> Any:
        obj = copy.copy(template)
        for k, v in values.items():
            object.__setattr__(obj, k, v)
        return obj

    return rebuild


def flatten(obj: Any) -> tuple[list[torch.Tensor], list[str], Spec]:
    """Tensors of ``obj`` in depth-first order, their path names, and the structure."""
    tensors: list[torch.Tensor] = []
    paths: list[str] = []

    def walk(x: Any, path: str) -> Spec:
        if isinstance(x, torch.Tensor):
            tensors.append(x)
            paths.append(path)
            return Spec("leaf", value=len(tensors) - 1)
        if isinstance(x, tuple):
            kids = tuple(walk(v, f"{path}.{i}" if path else str(i)) for i, v in enumerate(x))
            rebuild: Callable[..., Any] | None = _positional(type(x)) if hasattr(x, "_fields") else None
            return Spec("tuple", kids, rebuild=rebuild)
        if isinstance(x, list):
            return Spec("list", tuple(walk(v, f"{path}.{i}" if path else str(i)) for i, v in enumerate(x)))
        if isinstance(x, Mapping):
            keys = tuple(x.keys())
            kids = tuple(walk(x[k], f"{path}.{k}" if path else str(k)) for k in keys)
            rebuild_kw: Callable[..., Any] | None = None if type(x) is dict else _keywords(type(x))
            return Spec("dict", kids, keys, rebuild=rebuild_kw)
        if hasattr(x, "to_tuple") and hasattr(x, "keys"):  # ModelOutput-like objects
            keys = tuple(x.keys())
            kids = tuple(walk(x[k], f"{path}.{k}" if path else str(k)) for k in keys)
            return Spec("dict", kids, keys, rebuild=_keywords(type(x)))
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            keys = tuple(f.name for f in dataclasses.fields(x))
            kids = tuple(walk(getattr(x, k), f"{path}.{k}" if path else k) for k in keys)
            return Spec("dict", kids, keys, rebuild=_fields_of(x))
        return Spec("const", value=x)

    spec = walk(obj, "")
    return tensors, paths, spec


_PLAIN = (type(None), bool, int, float, complex, str, bytes)


def without_objects(obj: Any) -> Any:
    """``obj`` with every object :func:`flatten` keeps as a constant (a transformers
    ``DynamicCache``, a custom class) replaced by ``None``, rebuilt from its flattened
    structure: the outputs torch.export can return, with the same tensors in the same order."""
    tensors, _, spec = flatten(obj)
    return _objects_as_none(spec).unflatten(tensors)


def _objects_as_none(spec: Spec) -> Spec:
    if spec.kind == "const":
        return spec if isinstance(spec.value, _PLAIN) else attrs.evolve(spec, value=None)
    if spec.kind == "leaf":
        return spec
    return attrs.evolve(spec, children=tuple(_objects_as_none(c) for c in spec.children))


class NonTensorOutputWarning(UserWarning):
    """An output of the model that is not a tensor (a string, a number...): the artifact
    has no output for it."""


def non_tensor_outputs(spec: Spec | None, path: str = "") -> list[tuple[str, Any]]:
    """(path, value) of each output that is neither a tensor nor ``None``, depth first."""
    if spec is None or spec.kind == "leaf":
        return []
    if spec.kind == "const":
        return [] if spec.value is None else [(path or "0", spec.value)]
    labels = spec.keys if spec.kind in ("dict", "mapping") else range(len(spec.children))
    found = []
    for label, child in zip(labels, spec.children):
        found += non_tensor_outputs(child, f"{path}.{label}" if path else str(label))
    return found


def note_non_tensor_outputs(spec: Spec | None) -> None:
    """Warn once per output that the artifact drops because it is not a tensor."""
    for path, value in non_tensor_outputs(spec):
        kind = type(value).__name__
        article = "an" if kind[:1].lower() in "aeiou" else "a"
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        warnings.warn(
            f"the model's output {path} is {article} {kind} ({shown}), not a tensor: it is not in the "
            "artifact (only tensors are exported; return it as a tensor to keep it)",
            NonTensorOutputWarning, stacklevel=2)


def _identifier(path: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in path)


def input_names_from_paths(paths: Sequence[str]) -> list[str]:
    """``input_3`` for positional argument 3, ``attention_mask`` for a keyword argument,
    with nested positions appended (``input_0_1``)."""
    out = []
    for p in paths:
        head, _, rest = p.partition(".")
        if head == "0":
            pos, _, tail = rest.partition(".")
            name = f"input_{pos}" + (f"_{tail}" if tail else "")
        else:
            name = rest
        out.append(_identifier(name))
    return out


def output_names_from_paths(paths: Sequence[str]) -> list[str]:
    """``output_0`` for a lone tensor, ``output_1`` for tuple positions, field names for dicts."""
    if len(paths) == 1 and paths[0] == "":
        return ["output_0"]
    out = []
    for p in paths:
        name = p if p and not p[0].isdigit() else f"output_{p}"
        out.append(_identifier(name))
    return out


def io_names(
    input_names: Sequence[str] | None,
    output_names: Sequence[str] | None,
    input_paths: Sequence[str],
    output_paths: Sequence[str],
    *,
    rules: IdentifierRules,
) -> tuple[list[str], list[str]]:
    """The names of the graph's inputs and outputs, exactly as graph.nnef will have them.

    Names the caller gives are kept as given or refused (:class:`InvalidArgumentError`
    naming the name and the rule): each must be a string that is an identifier on the
    target (see :mod:`t2n.ir.identifiers`), and all input and output names together
    must be distinct. Names t2n derives from argument positions and dict keys are made
    valid and distinct instead (``my key`` → ``my_key``, ``graph`` → ``graph_``, a
    second ``x`` → ``x_1``), and each such change is logged as a warning.
    """
    ins = (_derived(input_names_from_paths(input_paths), input_paths, "input", set(), rules)
           if input_names is None else _given(input_names, len(input_paths), "input",
                                               input_names_from_paths(input_paths), rules))
    outs = (_derived(output_names_from_paths(output_paths), output_paths, "output", set(ins), rules)
            if output_names is None else _given(output_names, len(output_paths), "output",
                                                 output_names_from_paths(output_paths), rules))
    if output_names is not None:
        clash = [n for n in outs if n in ins]
        if clash:
            raise InvalidArgumentError(
                f"output name {clash[0]!r} is also an input name: graph.nnef needs distinct "
                "names for inputs and outputs (an output that returns an input unchanged is "
                "written as a copy, under its own name); choose another output name"
            )
    return ins, outs


def check_given_names(given: object, what: str, *, rules: IdentifierRules) -> list[str]:
    """``input_names``/``output_names`` as the caller gave them, or an
    :class:`InvalidArgumentError` naming the first bad name and the rule it breaks."""
    if isinstance(given, (str, bytes)) or not isinstance(given, Sequence):
        raise InvalidArgumentError(
            f"{what}_names must be a list of strings, got {type(given).__name__} {given!r}"
        )
    names = list(given)
    for i, name in enumerate(names):
        problem = rules.problem(name)
        if problem:
            raise InvalidArgumentError(
                f"{what}_names[{i}] = {name!r} {problem}; graph.nnef refers to {what}s by "
                "these names, so t2n does not change them: choose names made of ASCII "
                "letters, digits and '_', not starting with a digit"
            )
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise InvalidArgumentError(f"{what} names must be unique, but {dup!r} is given twice in {names}")
    return names


def _given(given: Sequence[str], count: int, what: str, default: Sequence[str], rules: IdentifierRules) -> list[str]:
    names = check_given_names(given, what, rules=rules)
    if len(names) != count:
        raise InvalidArgumentError(
            f"{len(names)} {what} names given but the model has {count} {what} tensors "
            f"(in order: {', '.join(default) or 'none'})"
        )
    return names


def _derived(names: Sequence[str], paths: Sequence[str], what: str, taken: set[str],
             rules: IdentifierRules) -> list[str]:
    out: list[str] = []
    for name, path in zip(names, paths):
        final = rules.make(name, fallback=what, taken=lambda n: n in taken)
        taken.add(final)
        out.append(final)
        if final != name or not _PLAIN_PATH.match(path):
            log.warning("%s %r is named %r in the artifact (names must be distinct identifiers "
                        "on the target); pass %s_names=[...] to choose", what, path, final, what)
    return out


_PLAIN_PATH = re.compile(r"[A-Za-z0-9_.]*\Z")


class FlatModule(torch.nn.Module):
    """Calls ``model`` with ``(args, kwargs)`` rebuilt from flat tensors; returns flat outputs."""

    def __init__(self, model: torch.nn.Module, spec: Spec) -> None:
        super().__init__()
        self.model = model
        self._spec = spec
        self.out_spec: Spec | None = None
        self.out_paths: list[str] = []

    def forward(self, *flat: torch.Tensor) -> tuple[torch.Tensor, ...]:
        args, kwargs = self._spec.unflatten(flat)
        out = self.model(*args, **kwargs)
        tensors, paths, spec = flatten(out)
        self.out_spec = spec
        self.out_paths = paths
        if not tensors:
            raise InvalidArgumentError("the model returned no tensor")
        return tuple(tensors)


def normalize_args(args: Any) -> tuple[Any, ...]:
    """``args`` as given to compile: one tensor, or a tuple/list of positional arguments."""
    if isinstance(args, torch.Tensor):
        return (args,)
    if isinstance(args, (tuple, list)):
        return tuple(args)
    raise InvalidArgumentError(
        f"args must be a tensor or a tuple of positional arguments, got {type(args).__name__} "
        "(pass keyword arguments as compile(..., kwargs={...}))"
    )
