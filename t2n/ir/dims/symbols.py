"""What a symbol of a dimension stands for.

A symbol is a size: at least 1 (t2n asserts ``S >= 1`` for the dynamic axes it
declares), or at least 0 for a length computed from tensor data. The bounds prover
reads these floors; the NNEF renderers and the IR's shape inference tell the two kinds
apart by name. Kept apart from the expression class, which knows nothing of sizes.
"""

from __future__ import annotations

from t2n.ir.dims.expr import Sym

DATA_SYMBOL_PREFIX = "_data_"
"""Symbols named so stand for a length computed from tensor data (``arange(n)`` with
``n`` an input): the engine names such a length itself (tract's ``range`` makes a fresh
symbol), so they are never declared nor written in a graph."""


def data_dim(tag: str) -> Sym:
    """The length of one data-sized axis (``tag`` unique in its graph)."""
    return Sym(DATA_SYMBOL_PREFIX + tag)


def is_data_symbol(name: str) -> bool:
    return name.startswith(DATA_SYMBOL_PREFIX)


def symbol_lower_bound(name: str) -> int:
    """Sizes are at least 1 (the dynamic axes t2n asserts non-empty), lengths computed
    from tensor data at least 0."""
    return 0 if is_data_symbol(name) else 1
