"""Symbolic shapes for the torch.export frontend.

Users spell dynamic sizes once, as for the jit frontend: ``dynamic_axes={"ids": {1: "S"}}``,
or as torch.export's ``dynamic_shapes`` (:mod:`.requests` translates between the two).
After the export, :func:`program_shapes` reads the program back:

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
axis is refused (``ExportSpecializationError``: trace with a size of 2 or more; with
``Dim.AUTO`` the axis becomes static and a ``BakedSizeWarning`` says so), and a symbol's
range may start at 2 for that reason alone. The exported graph does not depend on it, so
unless the user's ``Dim`` asks a minimum of 2 or more the artifact keeps tract's ``S >= 1``
(and runs at size 1 as PyTorch does).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import sympy  # type: ignore[import-untyped]
import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from t2n.errors import DynamicAxesError
from t2n.frontend.export.requests import (
    DynamicRequest,
    dynamic_request,
    export_request,
    input_names_of,
    with_ranges,
)
from t2n.frontend.export.symbolic import dim_of
from t2n.ir.dims import Dim, valid_symbol_name
from t2n.ir.identifiers import free_name
from t2n.passes.dynamic_axes import BakedSizeWarning, list_form_symbol

# -- reading the program back ---------------------------------------------------------


@attrs.frozen
class SymbolTable:
    """Each sympy symbol of the program (by its name, ``s27``) → the user's symbol name,
    and the example size of each user symbol (``graph.info.symbols``)."""

    names: Mapping[str, str] = attrs.field(factory=dict)
    traced: Mapping[str, int] = attrs.field(factory=dict)

    def dim(self, size: Any) -> Dim:
        """A size of the program (int, ``torch.SymInt`` or sympy expression) as an IR Dim
        (see :func:`~t2n.frontend.export.symbolic.dim_of`)."""
        return dim_of(size, self.names)

    def shape(self, sizes: Sequence[Any]) -> list[Dim]:
        return [self.dim(s) for s in sizes]


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
    if torch_name not in names:
        names[torch_name] = free_name(wanted, set(names.values()).__contains__)


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


def lowering_shapes(exported: Any, input_names: Sequence[str],
                    request: DynamicRequest | None, *, strict: bool = False) -> dict[str, Any]:
    """The ``symbols`` and ``assertions`` keyword arguments of the export driver for an
    exported model (or its ``program``), after refusing what t2n cannot export in it (see
    :mod:`.refusals`)."""
    from t2n.frontend.export.refusals import refuse_program

    program: ExportedProgram = getattr(exported, "program", exported)
    refuse_program(program)
    shapes = program_shapes(program, input_names, request, strict=strict)
    return {"symbols": dict(shapes.symbols.names), "assertions": list(shapes.assertions)}


__all__ = ["DynamicRequest", "ProgramShapes", "SymbolTable", "assertion_lines", "baked_sizes", "dynamic_request",
           "export_request", "input_names_of", "lowering_shapes", "program_shapes",
           "report_baked", "symbol_table", "with_ranges"]
