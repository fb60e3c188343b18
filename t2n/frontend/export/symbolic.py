"""Sizes in an exported program: ints when shapes are static, ``SymInt``s and their
sympy expressions mapped to the IR's dimensions (:func:`dim_of`, the one conversion of
the export frontend) when they are dynamic, and the Python ops torch.export records on
them."""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

import sympy  # type: ignore[import-untyped]
import torch
from torch.utils._sympy import functions as F

from t2n.errors import ExportFrontendError
from t2n.ir import Dim, Sym
from t2n.ir.dims import sym_max, sym_min

SymbolNames = Mapping[str, str]
"""Each symbol of the program by its name (``s27``) → the IR symbol name (``S``)."""

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


def dim_of(size: Any, names: SymbolNames) -> Dim:
    """A size of the program (an int, a ``torch.SymInt`` or its sympy expression) as the
    IR's ``Dim`` arithmetic, each program symbol renamed through ``names``: ``+``, ``*``,
    natural powers, min, max, and floor division and modulo by constants. Anything else, and a
    symbol ``names`` lacks (a size torch.export made from tensor data), is an
    ``ExportFrontendError`` naming the size."""
    if isinstance(size, torch.SymInt):
        node = size.node
        return int(size) if node.is_constant() else dim_of(node.expr, names)
    if isinstance(size, (int, sympy.Integer)):
        return int(size)
    if not isinstance(size, sympy.Expr):
        raise ExportFrontendError(
            f"the size {size} of type {type(size).__name__} has no form in tract's sizes, which "
            "are integers; export with frontend=\"jit\", or make that size an int",
            construct=f"a size of type {type(size).__name__}")
    if isinstance(size, sympy.Symbol):
        if size.name not in names:
            raise ExportFrontendError(
                f"the size {size} is not an input size (torch.export made it from tensor data, "
                "such as the length of nonzero or of a boolean mask); export with frontend=\"jit\" "
                "to keep the size the example gives", construct="a data-dependent size")
        return Sym(names[size.name])
    return _combined(size, [dim_of(a, names) for a in size.args])


def _combined(expr: Any, parts: list[Dim]) -> Dim:
    """``expr``'s operation on its arguments, already IR dims."""
    if isinstance(expr, sympy.Add):
        return functools.reduce(operator.add, parts, 0)
    if isinstance(expr, sympy.Mul):
        return functools.reduce(operator.mul, parts, 1)
    if isinstance(expr, sympy.Pow) and isinstance(parts[1], int) and parts[1] >= 0:
        return functools.reduce(operator.mul, [parts[0]] * parts[1], 1)
    if isinstance(expr, (F.FloorDiv, F.CleanDiv)) and isinstance(parts[1], int):
        return parts[0] // parts[1]
    if isinstance(expr, (F.Mod, F.PythonMod)) and isinstance(parts[1], int):
        return parts[0] % parts[1]
    if isinstance(expr, sympy.Min):  # PyTorch's clamped slice bounds
        return sym_min(*parts)
    if isinstance(expr, sympy.Max):
        return sym_max(*parts)
    raise ExportFrontendError(
        f"the size expression {expr} has no form in tract's symbolic sizes (only +, *, min, "
        "max, and // or % by constants); export with frontend=\"jit\", or make that size static",
        construct=f"size expression {type(expr).__name__}")


def program_symbols(program: torch.export.ExportedProgram) -> dict[str, str]:
    """Each symbol in the sizes of the program's inputs under its own name (``s0``):
    the table used when none is given (empty for a program of static sizes)."""
    table: dict[str, str] = {}
    for node in program.graph.nodes:
        val = node.meta.get("val") if node.op == "placeholder" else None
        for d in getattr(val, "shape", ()):
            if isinstance(d, torch.SymInt):
                for s in sorted(d.node.expr.free_symbols, key=str):
                    table.setdefault(s.name, s.name)
    return table
