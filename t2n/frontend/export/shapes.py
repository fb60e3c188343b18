"""Symbolic shapes for the torch.export frontend.

Users spell dynamic sizes once, as for the jit frontend: ``dynamic_axes={"ids": {1: "S"}}``
(keyed by the input names ``compile`` gives). :func:`dynamic_request` turns that into
torch.export's ``dynamic_shapes`` (one ``torch.export.Dim`` per symbol name, the same
object wherever the name repeats, so torch knows those sizes are equal), or takes a
``dynamic_shapes`` already in torch's form. After the export, :func:`program_shapes` reads
the program back:

* each sympy symbol of the program (``s27``) gets the user's name (the ``dynamic_axes``
  symbol or the ``Dim``'s name); every size expression (``2*s27``, ``(s27 - 1)//2 + 1``)
  becomes the IR's :data:`~t2n.ir.dims.Dim` arithmetic through :meth:`SymbolTable.dim`;
* the program's range constraints become ``tract_assert`` lines, see
  :func:`assertion_lines` for exactly which;
* an axis asked dynamic that the program holds as a constant (``Dim.AUTO`` that torch
  specialised, a given ``ExportedProgram`` exported at static sizes) is reported as a
  :class:`~t2n.passes.dynamic_axes.BakedSizeWarning` (a ``DynamicAxesError`` with
  ``strict_dynamic_axes=True``). An axis given as a named ``Dim`` that the model fixes
  makes torch.export fail instead: :mod:`t2n.frontend.export.refusals` turns that into an
  ``ExportSpecializationError`` naming the input and axis.

torch.export specialises sizes 0 and 1: an example input of size 0 or 1 on a dynamic
axis is refused (trace with a size of 2 or more), and the program assumes such sizes
are never 0 or 1. The exported graph itself does not depend on that, so unless the
user's ``Dim`` asks a larger minimum the artifact keeps tract's ``S >= 1``.
"""

from __future__ import annotations

import inspect
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import sympy  # type: ignore[import-untyped]
import torch
from torch.export import Dim as TorchDim
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from t2n.errors import DynamicAxesError, ExportFrontendError, InvalidArgumentError
from t2n.frontend.io import flatten, input_names_from_paths
from t2n.ir.dims import Dim, Sym, valid_symbol_name
from t2n.passes.dynamic_axes import BakedSizeWarning, list_form_symbol, normalize_dynamic_axes

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


# -- reading the program back ---------------------------------------------------------


@attrs.frozen
class SymbolTable:
    """Each sympy symbol of the program (by its name, ``s27``) → the user's symbol name,
    and the example size of each user symbol (``graph.info.symbols``)."""

    names: Mapping[str, str] = attrs.field(factory=dict)
    traced: Mapping[str, int] = attrs.field(factory=dict)

    def dim(self, size: Any) -> Dim:
        """A size of the program (int, ``torch.SymInt`` or sympy expression) as an IR Dim."""
        if isinstance(size, torch.SymInt):
            node = size.node
            return self.dim(node.expr) if not node.is_constant() else int(size)
        if isinstance(size, int):
            return int(size)
        return sympy_to_dim(size, self.names)

    def shape(self, sizes: Sequence[Any]) -> list[Dim]:
        return [self.dim(s) for s in sizes]


def sympy_to_dim(expr: Any, names: Mapping[str, str]) -> Dim:
    """A sympy size expression as IR Dim arithmetic (``+``, ``*``, integer powers, floor
    division and modulo by constants); anything else is an ``ExportFrontendError``."""
    from torch.utils._sympy import functions as F

    if isinstance(expr, (int, sympy.Integer)):
        return int(expr)
    if isinstance(expr, sympy.Symbol):
        if expr.name not in names:
            raise ExportFrontendError(
                f"the size {expr} is not an input size (torch.export made it from tensor data, "
                "such as the length of nonzero or of a boolean mask); export with frontend=\"jit\" "
                "to keep the size the example gives", construct="a data-dependent size")
        return Sym(names[expr.name])
    parts = [sympy_to_dim(a, names) for a in expr.args]
    if isinstance(expr, sympy.Add):
        total: Dim = 0
        for p in parts:
            total = total + p
        return total
    if isinstance(expr, sympy.Mul):
        prod: Dim = 1
        for p in parts:
            prod = prod * p
        return prod
    if isinstance(expr, sympy.Pow) and isinstance(parts[1], int) and parts[1] >= 0:
        out: Dim = 1
        for _ in range(parts[1]):
            out = out * parts[0]
        return out
    if isinstance(expr, (F.FloorDiv, F.CleanDiv)) and isinstance(parts[1], int):
        return parts[0] // parts[1]
    if isinstance(expr, (F.Mod, F.PythonMod)) and isinstance(parts[1], int):
        return parts[0] % parts[1]
    raise ExportFrontendError(
        f"the size expression {expr} has no form in tract's symbolic sizes (only +, *, and "
        "// or % by constants); export with frontend=\"jit\", or make that size static",
        construct=f"size expression {type(expr).__name__}")


def user_input_values(program: ExportedProgram) -> list[Any]:
    """The example value (``meta['val']``) of each user input placeholder, in order."""
    wanted = [s.arg.name for s in program.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    nodes = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    return [nodes[name].meta.get("val") for name in wanted if name in nodes]


def symbol_table(program: ExportedProgram, input_names: Sequence[str],
                 request: DynamicRequest | None = None) -> SymbolTable:
    """Name the program's symbols: an axis's symbol takes the name the user gave that axis
    (``dynamic_axes`` or the ``Dim``), else the name torch recorded for the ``Dim``, else
    ``<input>_dim<axis>``. The symbol of a derived size (``2*s27`` for ``2 * S``) takes its
    root's name."""
    request = request or DynamicRequest()
    names: dict[str, str] = {}
    traced: dict[str, int] = {}
    debug = _debug_names(program)
    pending: list[tuple[Any, str, int]] = []
    for name, val in zip(input_names, user_input_values(program)):
        for axis, size in enumerate(getattr(val, "shape", ())):
            if not isinstance(size, torch.SymInt) or size.node.is_constant():
                continue
            expr = size.node.expr
            if isinstance(expr, sympy.Symbol):
                wanted = request.axes.get(name, {}).get(axis) or debug.get(expr.name) or list_form_symbol(name, axis)
                _assign(names, expr.name, wanted)
                traced.setdefault(names[expr.name], _hint(size))
            else:
                pending.append((expr, name, axis))
    for expr, name, axis in pending:
        for free in sorted(expr.free_symbols, key=str):
            if free.name not in names:
                wanted = request.axes.get(name, {}).get(axis) or debug.get(free.name) or f"{name}_dim{axis}_root"
                _assign(names, free.name, wanted)
    return SymbolTable(names, _root_sizes(program, names, traced))


def _assign(names: dict[str, str], torch_name: str, wanted: str) -> None:
    """Give ``torch_name`` the user name ``wanted`` (made unique if another symbol has it)."""
    if torch_name in names:
        return
    taken = set(names.values())
    final, n = wanted, 1
    while final in taken:
        final, n = f"{wanted}_{n}", n + 1
    names[torch_name] = final


def _hint(size: torch.SymInt) -> int:
    hint = size.node.hint
    return int(hint) if hint is not None else 0


def _root_sizes(program: ExportedProgram, names: Mapping[str, str], traced: Mapping[str, int]) -> dict[str, int]:
    """The example value of every named symbol (those of derived sizes solved from the
    shape-environment hints)."""
    out = {k: v for k, v in traced.items() if v}
    env = _shape_env(program)
    hints = getattr(env, "backed_var_to_val", None) or getattr(env, "var_to_val", {})
    for sym, value in hints.items():
        user = names.get(getattr(sym, "name", ""))
        if user is not None and user not in out:
            out[user] = int(value)
    return dict(sorted(out.items()))


def _shape_env(program: ExportedProgram) -> Any:
    for val in user_input_values(program):
        for size in getattr(val, "shape", ()):
            if isinstance(size, torch.SymInt):
                return size.node.shape_env
    return None


def _debug_names(program: ExportedProgram) -> dict[str, str]:
    """The ``Dim`` names torch recorded for the program's symbols (``s27`` → ``S``). Read
    from the shape environment's private bookkeeping; empty where it is not there, and
    the caller names such symbols from input and axis instead."""
    env = _shape_env(program)
    by_source = getattr(env, "source_name_to_debug_name", None)
    sources = getattr(env, "var_to_sources", None)
    if not isinstance(by_source, Mapping) or not isinstance(sources, Mapping):
        return {}
    out: dict[str, str] = {}
    for sym, found in sources.items():
        for source in found:
            text = getattr(source, "name", None)
            name = by_source.get(text() if callable(text) else text)
            if isinstance(name, str) and valid_symbol_name(name):
                out.setdefault(str(sym), name)
    return out


# -- range constraints and specialised sizes --------------------------------------------


def assertion_lines(program: ExportedProgram, table: SymbolTable,
                    request: DynamicRequest | None = None) -> list[str]:
    """``tract_assert`` lines for the program's range constraints on input symbols.

    For each named symbol ``S`` with range ``[lo, hi]``: ``S <= hi`` when ``hi`` is finite;
    ``S >= lo`` when ``lo > 2``, or ``lo == 2`` and the user's ``Dim`` asked ``min=2``.
    A lower bound of 0, 1 or torch's own 2 (it assumes dynamic sizes are not 0 or 1) is
    left to the renderer's default ``S >= 1``. Bounds of derived expressions (``2*s27``)
    follow from their root's and are not repeated.
    """
    request = request or DynamicRequest()
    lines: list[str] = []
    for sym, bounds in program.range_constraints.items():
        if not isinstance(sym, sympy.Symbol) or sym.name not in table.names:
            continue
        user = table.names[sym.name]
        lo, hi = _finite(bounds.lower), _finite(bounds.upper)
        asked_min = _finite(getattr(request.dims.get(user), "min", None)) or 0
        if lo is not None and (lo > 2 or (lo == 2 and asked_min >= 2)):
            lines.append(f"tract_assert {user} >= {lo}")
        if hi is not None:
            lines.append(f"tract_assert {user} <= {hi}")
    return lines


def _finite(bound: Any) -> int | None:
    """An integer bound, or None for ±infinity (sympy's ``oo`` or torch's ``int_oo``)."""
    if isinstance(bound, bool) or not isinstance(bound, (int, sympy.Integer)):
        return None
    value = int(bound)
    return value if abs(value) < 2**62 else None


def baked_sizes(program: ExportedProgram, input_names: Sequence[str], request: DynamicRequest) -> list[str]:
    """Axes asked dynamic that the program holds as constants, one line each."""
    out: list[str] = []
    values = dict(zip(input_names, user_input_values(program)))
    for name, per in request.axes.items():
        shape = getattr(values.get(name), "shape", None)
        if shape is None:
            continue
        for axis, symbol in sorted(per.items()):
            size = shape[axis] if axis < len(shape) else None
            if isinstance(size, int) or (isinstance(size, torch.SymInt) and size.node.is_constant()):
                why = (" (torch.export fixes sizes 0 and 1: give an example of size 2 or more)"
                       if int(size) in (0, 1) else "")
                auto = " (asked as Dim.AUTO)" if axis in request.auto.get(name, ()) else ""
                out.append(f"input {name!r} axis {axis}{auto}: torch.export made it the constant "
                           f"{int(size)} instead of the symbol {symbol}{why}")
    return out


def report_baked(problems: Sequence[str], *, strict: bool) -> None:
    """Warn (``BakedSizeWarning``) or, when ``strict``, raise ``DynamicAxesError`` for sizes
    that torch.export fixed although they were asked dynamic."""
    if not problems:
        return
    text = "\n  ".join(problems)
    if strict:
        raise DynamicAxesError(f"sizes fixed by torch.export although asked dynamic:\n  {text}\n"
                               "export with another example size or frontend=\"jit\", or drop these axes")
    warnings.warn("some sizes asked dynamic were fixed by torch.export (the artifact only runs at "
                  f"these sizes):\n  {text}", BakedSizeWarning, stacklevel=3)


@attrs.frozen
class ProgramShapes:
    """What the driver needs from the program's shapes: the symbol table, the assertion
    lines for graph.nnef, and the sizes torch.export fixed although asked dynamic."""

    symbols: SymbolTable
    assertions: tuple[str, ...]
    baked: tuple[str, ...]


def program_shapes(program: ExportedProgram, input_names: Sequence[str],
                   request: DynamicRequest | None = None, *, strict: bool = False) -> ProgramShapes:
    """Read ``program``'s symbolic shapes (see the module docstring); reports baked sizes
    through :func:`report_baked`."""
    request = request or DynamicRequest()
    table = symbol_table(program, input_names, request)
    baked = baked_sizes(program, input_names, request)
    report_baked(baked, strict=strict)
    return ProgramShapes(table, tuple(assertion_lines(program, table, request)), tuple(baked))


# -- what compile calls --------------------------------------------------------------


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


def lowering_shapes(exported: Any, input_names: Sequence[str],
                    request: DynamicRequest | None, *, strict: bool = False) -> dict[str, Any]:
    """The ``symbols`` and ``assertions`` keyword arguments of the export driver for an
    exported model (or its ``program``), after refusing what t2n cannot export in it (see
    :mod:`.refusals`)."""
    from t2n.frontend.export.refusals import refuse_program

    program: ExportedProgram = getattr(exported, "program", exported)
    refuse_program(program)
    shapes = program_shapes(program, input_names, request, strict=strict)
    by_symbol = {s: shapes.symbols.names[s.name] for s in _program_symbols(program)
                 if s.name in shapes.symbols.names}
    return {"symbols": by_symbol, "assertions": list(shapes.assertions)}


def _program_symbols(program: ExportedProgram) -> set[Any]:
    found: set[Any] = set(s for s in program.range_constraints if isinstance(s, sympy.Symbol))
    for val in user_input_values(program):
        for size in getattr(val, "shape", ()):
            if isinstance(size, torch.SymInt):
                found |= set(size.node.expr.free_symbols)
    return found


def dynamic_request_for(frontend: str, model: Any, args: Sequence[Any], kwargs: Mapping[str, Any] | None,
                        input_names: Sequence[str] | None, dynamic_axes: Mapping[str, Any] | None,
                        dynamic_shapes: Any) -> DynamicRequest | None:
    """:func:`export_request` for ``frontend="export"``; ``None`` for the jit frontend,
    which takes ``dynamic_axes`` only (``dynamic_shapes`` is refused there)."""
    if frontend == "export":
        return export_request(model, args, kwargs, input_names, dynamic_axes, dynamic_shapes)
    if dynamic_shapes is not None:
        raise InvalidArgumentError(
            "dynamic_shapes (torch.export's form) is for frontend=\"export\"; with the jit frontend "
            "give dynamic_axes={'input_0': {1: 'S'}}, or pass frontend=\"export\"")
    return None


__all__ = ["DynamicRequest", "ProgramShapes", "SymbolTable", "assertion_lines", "baked_sizes", "dynamic_request", "dynamic_request_for",
           "export_request", "input_names_of", "lowering_shapes", "program_shapes", "report_baked",
           "symbol_table", "sympy_to_dim", "with_ranges"]
