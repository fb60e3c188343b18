"""Sizes in an exported program: ints when shapes are static, ``SymInt``s mapped to
the IR's dimensions through a symbol table when they are dynamic, and the Python ops
torch.export records on them."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import torch

from t2n.frontend.context import UnsupportedHere
from t2n.ir import Dim, parse_dim

SymbolTable = dict[Any, str]
"""sympy symbol of the program (``s0``) → the IR symbol name (``S``)."""

PYTHON_OPS: dict[Any, Callable[..., Any]] = {
    operator.add: operator.add, operator.sub: operator.sub, operator.mul: operator.mul,
    operator.floordiv: operator.floordiv, operator.truediv: operator.truediv,
    operator.mod: operator.mod, operator.neg: operator.neg, operator.pow: operator.pow,
    operator.eq: operator.eq, operator.ne: operator.ne, operator.lt: operator.lt,
    operator.le: operator.le, operator.gt: operator.gt, operator.ge: operator.ge,
    torch.sym_int: int, torch.sym_float: float, torch.sym_max: max, torch.sym_min: min,
    math.ceil: math.ceil, math.floor: math.floor,
}
"""Python functions on sizes found in exported graphs, folded when their inputs are numbers."""

PYTHON_OP_RULES: dict[Any, str] = {
    operator.add: "aten::add", operator.sub: "aten::sub", operator.mul: "aten::mul",
    operator.floordiv: "aten::floor_divide", operator.truediv: "aten::div",
    operator.mod: "aten::remainder", operator.neg: "aten::neg", operator.pow: "aten::pow",
    operator.eq: "aten::eq", operator.ne: "aten::ne", operator.lt: "aten::lt",
    operator.le: "aten::le", operator.gt: "aten::gt", operator.ge: "aten::ge",
    torch.sym_max: "aten::maximum", torch.sym_min: "aten::minimum",
}
"""The rule that computes a Python op of ``PYTHON_OPS`` on run-time sizes (its
arguments are named ``self`` and ``other``)."""

RUNTIME_CHECKS = frozenset({
    "aten::_assert_scalar", "aten::_assert_async", "aten::sym_constrain_range",
    "aten::sym_constrain_range_for_size", "aten::_print",
})
"""Ops torch.export adds to check sizes at run time (their facts are in the program's
range constraints): nothing to compute."""

SIZE_ALIASES: dict[str, str] = {
    "aten::sym_size": "aten::size", "aten::sym_numel": "aten::numel",
}
"""Size ops of exported graphs → the rule of the same op in TorchScript graphs."""


def dim_of(x: Any, symbols: SymbolTable) -> Any:
    """A size of the program as the IR's ``Dim``: ints as they are, a ``SymInt`` through
    ``symbols`` (its sympy expression with the program's symbols renamed)."""
    if isinstance(x, (int, float, bool)):
        return x
    if isinstance(x, torch.SymInt):
        expr = x.node.expr
        if expr.is_number:
            return int(expr)
        missing = [s for s in expr.free_symbols if s not in symbols]
        if missing:
            raise UnsupportedHere(f"size {expr} depends on {', '.join(map(str, missing))}, which no "
                                  "dynamic axis names")
        text = str(expr.subs({s: _placeholder(symbols[s]) for s in expr.free_symbols}))
        return _parse(text)
    raise UnsupportedHere(f"size {x} of type {type(x).__name__} cannot be exported")


def _placeholder(name: str) -> Any:
    import sympy  # type: ignore[import-untyped]

    return sympy.Symbol(name, integer=True, positive=True)


def _parse(text: str) -> Dim:
    return parse_dim(text.replace("//", "/"))


def program_symbols(program: torch.export.ExportedProgram) -> SymbolTable:
    """Each symbol in the sizes of the program's inputs under its own name (``s0``):
    the table used when none is given (empty for a program of static sizes)."""
    table: SymbolTable = {}
    for node in program.graph.nodes:
        val = node.meta.get("val") if node.op == "placeholder" else None
        for d in getattr(val, "shape", ()):
            if isinstance(d, torch.SymInt):
                for s in sorted(d.node.expr.free_symbols, key=str):
                    table.setdefault(s, str(s))
    return table
