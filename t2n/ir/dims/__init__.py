"""Symbolic dimensions: sizes that are ints or expressions over named symbols.

Every symbol stands for a size: at least 1 (t2n asserts ``S >= 1`` for dynamic axes),
or at least 0 for a length computed from tensor data (:func:`data_dim`).
:func:`lower_bound` and :func:`decide` use that to settle comparisons such as
``S // 2 <= S`` or ``min(S, 8) <= S``; what they cannot settle stays symbolic or raises
:class:`SymbolicComparisonError`.

The package is layered from the bottom up, so that none of its files imports another
in a circle: ``expr`` (the :class:`Sym` class and its arithmetic), ``symbols`` (what a
symbol stands for), ``bounds`` (the prover), ``extrema`` (minima and maxima folded with
the prover, and :func:`substitute`, which re-folds them), ``parse`` (dimensions read
from text). Import the names from here.
"""

from t2n.ir.dims.bounds import decide, lower_bound, provably_ge, upper_bound
from t2n.ir.dims.expr import (
    Dim,
    DimParseError,
    Sym,
    SymbolicComparisonError,
    UnboundSymbolError,
    as_dim,
    dim_symbols,
    has_sym,
    is_static,
    valid_symbol_name,
)
from t2n.ir.dims.extrema import substitute, sym_max, sym_min
from t2n.ir.dims.parse import parse_dim
from t2n.ir.dims.symbols import DATA_SYMBOL_PREFIX, data_dim, is_data_symbol, symbol_lower_bound

__all__ = [
    "DATA_SYMBOL_PREFIX", "Dim", "DimParseError", "Sym", "SymbolicComparisonError",
    "UnboundSymbolError", "as_dim", "data_dim", "decide", "dim_symbols", "has_sym",
    "is_data_symbol", "is_static", "lower_bound", "parse_dim", "provably_ge", "substitute",
    "sym_max", "sym_min", "symbol_lower_bound", "upper_bound", "valid_symbol_name",
]
