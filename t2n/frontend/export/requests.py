"""What the user asks to be dynamic, in torch.export's terms.

Users spell dynamic sizes once, as for the jit frontend: ``dynamic_axes={"ids": {1: "S"}}``
(keyed by the input names ``compile`` gives). :func:`dynamic_request` turns that into
torch.export's ``dynamic_shapes`` (one ``torch.export.Dim`` per symbol name, the same
object wherever the name repeats, so torch knows those sizes are equal; nested inputs
follow the structure of ``forward``'s arguments), or reads a ``dynamic_shapes`` given in
torch's form back into input names and axes. :func:`with_ranges` gives a request the
range torch.export asks for (``S <= 64`` for a table of 64 positions).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import torch
from torch.export import Dim as TorchDim
from torch.export import ExportedProgram

from t2n.errors import DynamicAxesError, InvalidArgumentError
from t2n.frontend.io import flatten, input_names_from_paths
from t2n.ir.dims import valid_symbol_name
from t2n.passes.dynamic_axes import list_form_symbol, normalize_dynamic_axes

_AUTO_MARKERS = tuple(getattr(TorchDim, n) for n in ("AUTO", "DYNAMIC") if hasattr(TorchDim, n))


@attrs.frozen
class DynamicRequest:
    """What the user asked to be dynamic, in both spellings.

    ``dynamic_shapes`` goes to ``torch.export.export``; ``axes`` is ``{input name: {axis:
    symbol name}}`` for every axis asked dynamic; ``dims`` the ``torch.export.Dim`` of each
    symbol name (its ``min``/``max`` decide the ``tract_assert`` lines); ``auto`` the axes
    asked as ``Dim.AUTO``/``Dim.DYNAMIC`` (torch may fix those without an error).
    """

    dynamic_shapes: Any = None
    axes: Mapping[str, Mapping[int, str]] = attrs.field(factory=dict)
    dims: Mapping[str, Any] = attrs.field(factory=dict)
    auto: Mapping[str, frozenset[int]] = attrs.field(factory=dict)
    from_axes: bool = False
    """Made from ``dynamic_axes``: t2n owns its Dims and may give them the range torch asks."""

    @property
    def dynamic(self) -> bool:
        return bool(self.axes) or self.dynamic_shapes is not None


def input_names_of(args: Sequence[Any], kwargs: Mapping[str, Any] | None,
                   given: Sequence[str] | None = None) -> tuple[list[str], list[str]]:
    """The flattening paths of the tensors in ``(args, kwargs)`` and their input names, as
    ``compile`` names them (``input_0``, ``attention_mask``…) unless ``given``."""
    tensors, paths, _ = flatten((tuple(args), dict(kwargs or {})))
    names = list(given) if given is not None else input_names_from_paths(paths)
    if len(names) != len(tensors):
        raise InvalidArgumentError(f"{len(names)} input names given for {len(tensors)} input tensors")
    return paths, names


def dynamic_request(
    forward: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    input_names: Sequence[str] | None,
    *,
    dynamic_axes: Mapping[str, Any] | None = None,
    dynamic_shapes: Any = None,
) -> DynamicRequest:
    """The ``dynamic_shapes`` to export ``forward(*args, **kwargs)`` with, from t2n's
    ``dynamic_axes`` or torch's ``dynamic_shapes`` (one of the two: both is an
    ``InvalidArgumentError``). ``input_names`` are the names ``dynamic_axes`` uses
    (``None``: the derived ``input_0``… names)."""
    if dynamic_axes and dynamic_shapes is not None:
        raise InvalidArgumentError(
            "give dynamic_axes (t2n's form, {'input_0': {1: 'S'}}) or dynamic_shapes (torch.export's "
            "form, with torch.export.Dim), not both: they say the same thing"
        )
    paths, names = input_names_of(args, kwargs, input_names)
    leaves = dict(zip(paths, names))
    tensors, _, _ = flatten((tuple(args), dict(kwargs or {})))
    ranks = {n: t.dim() for n, t in zip(names, tensors)}
    params = _bound_arguments(forward, args, kwargs)
    if dynamic_shapes is not None:
        return _from_torch_form(dynamic_shapes, params, leaves, ranks)
    if not dynamic_axes:
        return DynamicRequest()
    axes = normalize_dynamic_axes(dynamic_axes, ranks)
    dims = {sym: TorchDim(sym) for per in axes.values() for sym in per.values()}
    by_path = {p: {a: dims[s] for a, s in axes[n].items()} for p, n in leaves.items() if n in axes}
    spec = {name: _spec_like(value, prefix, by_path) for name, (value, prefix) in params.items()}
    return DynamicRequest(spec, axes, dims, from_axes=True)


_RANGE_FIX = re.compile(r"^(\w+) = Dim\('(\w+)'((?:, (?:min|max)=\d+)*)\)$")


def with_ranges(request: DynamicRequest, fixes: Sequence[str]) -> DynamicRequest | None:
    """``request`` with the ranges torch.export suggests (``S = Dim('S', max=64)``: the model
    only runs for such sizes, a position table of 64 rows...), or ``None`` when a fix is
    not a range of a symbol t2n made from ``dynamic_axes``."""
    if not request.from_axes or not fixes:
        return None
    ranges: dict[str, dict[str, int]] = {}
    for fix in fixes:
        found = _RANGE_FIX.match(fix.strip())
        if found is None or found.group(1) != found.group(2) or found.group(1) not in request.dims:
            return None
        ranges[found.group(1)] = {k: int(v) for k, v in re.findall(r"(min|max)=(\d+)", found.group(3))}
    dims = {name: TorchDim(name, **ranges[name]) if name in ranges else dim for name, dim in request.dims.items()}
    swap = {id(old): dims[name] for name, old in request.dims.items()}
    return attrs.evolve(request, dynamic_shapes=_swap_dims(request.dynamic_shapes, swap), dims=dims)


def _swap_dims(spec: Any, swap: Mapping[int, Any]) -> Any:
    if isinstance(spec, Mapping):
        return {k: _swap_dims(v, swap) for k, v in spec.items()}
    if isinstance(spec, (tuple, list)):
        return type(spec)(_swap_dims(v, swap) for v in spec)
    return swap.get(id(spec), spec)


def _bound_arguments(forward: Callable[..., Any], args: Sequence[Any],
                     kwargs: Mapping[str, Any] | None) -> dict[str, tuple[Any, str]]:
    """Each parameter of ``forward`` → (its value, the flattening path of that value)."""
    try:
        sig = inspect.signature(forward)
        bound = sig.bind(*args, **dict(kwargs or {}))
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"the inputs do not fit the signature of forward: {exc}") from exc
    out: dict[str, tuple[Any, str]] = {}
    position = 0
    for name, value in bound.arguments.items():
        kind = sig.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            out[name] = (value, f"0.{position}..")  # the elements follow the positional ones
            position += len(value)
        elif kind is inspect.Parameter.VAR_KEYWORD:
            out[name] = (value, "1..")
        elif position < len(args) and kind is not inspect.Parameter.KEYWORD_ONLY:
            out[name] = (value, f"0.{position}")
            position += 1
        else:
            out[name] = (value, f"1.{name}")
    return out


def _child_path(prefix: str, key: Any, index: int) -> str:
    """The flattening path of child ``key`` (position ``index``) under ``prefix``; the
    ``..`` forms stand for the elements of ``*args`` (offset) and ``**kwargs`` (by key)."""
    if prefix.endswith(".."):
        head = prefix[:-2]
        if head == "1":
            return f"1.{key}"
        section, _, start = head.partition(".")
        return f"{section}.{int(start) + index}"
    return f"{prefix}.{key}"


def _spec_like(value: Any, path: str, by_path: Mapping[str, Mapping[int, Any]]) -> Any:
    """A ``dynamic_shapes`` entry shaped like ``value``: ``{axis: Dim}`` for a tensor with
    dynamic axes, ``None`` for other leaves, containers rebuilt around them."""
    if isinstance(value, torch.Tensor):
        return dict(by_path[path]) if path in by_path else None
    if isinstance(value, (tuple, list)):
        items = [_spec_like(v, _child_path(path, i, i), by_path) for i, v in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, Mapping):
        return {k: _spec_like(v, _child_path(path, k, i), by_path) for i, (k, v) in enumerate(value.items())}
    return None


def _from_torch_form(spec: Any, params: Mapping[str, tuple[Any, str]], leaves: Mapping[str, str],
                     ranks: Mapping[str, int]) -> DynamicRequest:
    """Read a user's ``dynamic_shapes`` back into axes and Dims (it goes to torch as given)."""
    if isinstance(spec, Mapping):
        pairs = [(params[k], s) for k, s in spec.items() if k in params]
    elif isinstance(spec, (tuple, list)):
        pairs = list(zip(params.values(), spec))
    else:
        raise InvalidArgumentError(
            f"dynamic_shapes must be a tuple (one entry per argument of forward) or a dict by "
            f"argument name, as torch.export.export takes it; got {type(spec).__name__}"
        )
    axes: dict[str, dict[int, str]] = {}
    dims: dict[str, Any] = {}
    auto: dict[str, set[int]] = {}
    for (value, path), entry in pairs:
        _read_entry(value, path, entry, leaves, axes, dims, auto)
    for name, per in axes.items():
        for axis in per:
            if not -ranks[name] <= axis < ranks[name]:
                raise DynamicAxesError(f"dynamic_shapes: axis {axis} is out of range for input {name!r} "
                                       f"of rank {ranks[name]}")
    return DynamicRequest(spec, axes, dims, {n: frozenset(a) for n, a in auto.items()})


def _read_entry(value: Any, path: str, entry: Any, leaves: Mapping[str, str],
                axes: dict[str, dict[int, str]], dims: dict[str, Any], auto: dict[str, set[int]]) -> None:
    if entry is None:
        return
    if isinstance(value, torch.Tensor):
        name = leaves.get(path)
        if name is None:
            return
        per_axis = dict(enumerate(entry)) if isinstance(entry, (tuple, list)) else dict(entry)
        for axis, dim in per_axis.items():
            symbol = _dim_symbol(dim, name, int(axis) % max(value.dim(), 1), dims)
            if symbol is not None:
                axes.setdefault(name, {})[int(axis) % max(value.dim(), 1)] = symbol
            if any(dim is m for m in _AUTO_MARKERS):
                auto.setdefault(name, set()).add(int(axis) % max(value.dim(), 1))
        return
    if isinstance(value, (tuple, list)) and isinstance(entry, (tuple, list)):
        for i, (v, e) in enumerate(zip(value, entry)):
            _read_entry(v, _child_path(path, i, i), e, leaves, axes, dims, auto)
    elif isinstance(value, Mapping) and isinstance(entry, Mapping):
        for i, (k, v) in enumerate(value.items()):
            _read_entry(v, _child_path(path, k, i), entry.get(k), leaves, axes, dims, auto)


def _dim_symbol(dim: Any, name: str, axis: int, dims: dict[str, Any]) -> str | None:
    """The symbol name of one ``dynamic_shapes`` axis entry (``None`` for static ones)."""
    if dim is None or isinstance(dim, int) or dim is getattr(TorchDim, "STATIC", object()):
        return None
    if any(dim is m for m in _AUTO_MARKERS):
        return list_form_symbol(name, axis)
    root = getattr(dim, "root", None)  # a derived Dim (2 * S): its symbol is the root's
    base = root if root is not None else dim
    symbol = getattr(base, "__name__", None)
    if not isinstance(symbol, str) or not valid_symbol_name(symbol):
        raise DynamicAxesError(f"dynamic_shapes for input {name!r} axis {axis}: {dim!r} is not a "
                               "torch.export.Dim with a name tract accepts (letters, digits, _)")
    dims[symbol] = base
    return symbol


def export_request(model: Any, args: Sequence[Any], kwargs: Mapping[str, Any] | None,
                   input_names: Sequence[str] | None, dynamic_axes: Mapping[str, Any] | None,
                   dynamic_shapes: Any) -> DynamicRequest:
    """The dynamic sizes ``compile(frontend="export")`` asks torch.export for. An
    ``ExportedProgram`` is already exported: its own ``Dim``s decide, ``dynamic_shapes``
    is refused and ``dynamic_axes`` only checked against it (axes it holds static are
    reported as baked sizes)."""
    if isinstance(model, ExportedProgram):
        if dynamic_shapes is not None:
            raise InvalidArgumentError(
                "dynamic_shapes applies when t2n calls torch.export.export; this model is an "
                "ExportedProgram already: pass dynamic_shapes to torch.export.export instead")
        _, names = input_names_of(args, kwargs, input_names)
        tensors, _, _ = flatten((tuple(args), dict(kwargs or {})))
        axes = normalize_dynamic_axes(dynamic_axes, {n: t.dim() for n, t in zip(names, tensors)})
        return DynamicRequest(None, axes, {})
    return dynamic_request(model.forward, args, kwargs, input_names,
                           dynamic_axes=dynamic_axes, dynamic_shapes=dynamic_shapes)


__all__ = ["DynamicRequest", "dynamic_request", "export_request", "input_names_of",
           "with_ranges"]
