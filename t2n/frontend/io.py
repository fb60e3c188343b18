"""Flattening of model inputs and outputs.

Tensors nested in tuples, lists and dicts (including ``transformers`` ModelOutput,
which is an ordered dict) are flattened depth-first: sequences in order, dicts in
insertion order. Anything that is not a tensor stays in the structure as a
constant. Names follow the path (``logits``, ``past_key_values.0.1``) unless the
user gives names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import torch

from t2n.errors import InvalidArgumentError


@attrs.frozen
class Leaf:
    """A tensor position in a structure."""

    index: int


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
        return Spec("const", value=x)

    spec = walk(obj, "")
    return tensors, paths, spec


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


def check_names(given: Sequence[str] | None, default: list[str], paths: Sequence[str], what: str) -> list[str]:
    if given is None:
        return default
    names = list(given)
    if len(names) != len(default):
        raise InvalidArgumentError(
            f"{len(names)} {what} names given but the model has {len(default)} {what} tensors "
            f"(in order: {', '.join(default) or 'none'})"
        )
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"{what} names must be unique, got {names}")
    return names


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
