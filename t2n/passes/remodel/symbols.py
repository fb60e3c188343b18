"""Changing symbols graph-wide, and keeping the ``tract_assert`` lines true to them.

A symbol lives in input types, in the sizes ops hold (a ``const`` of sizes, a symbol
named in an attribute, an NNEF statement read back, whose ``expr`` attribute offers
:meth:`SymbolicText.with_symbols`), and in every type inferred from those.
:func:`substitute_symbols` rewrites the first three and infers the rest again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from t2n.errors import RemodelPlanError
from t2n.ir import ArrayData, Graph, Shape, Sym, TensorData
from t2n.ir.dims import Dim, DimParseError, parse_dim, substitute

SYMBOL_NAME_ATTRS = {"kv_cache_append": ("past",)}
"""IR attributes that hold a symbol's name (the cache's past length)."""


@runtime_checkable
class SymbolicText(Protocol):
    """An attribute value holding sizes in a form of its own (an NNEF statement's text)."""

    def with_symbols(self, bindings: Mapping[str, Any]) -> object: ...

    def symbols(self) -> frozenset[str]: ...


def _sub_value(value: Any, bindings: Mapping[str, Dim]) -> Any:
    """``value`` with the symbols substituted, or ``value`` itself when it has none."""
    if isinstance(value, Sym):
        return substitute(value, bindings)
    if isinstance(value, SymbolicText):
        return value.with_symbols(bindings) if value.symbols() & bindings.keys() else value
    if isinstance(value, ArrayData) and value.is_symbolic:
        old = value.array.reshape(-1).tolist()
        flat = [substitute(d, bindings) for d in old]
        if flat == old:
            return value
        arr: np.ndarray
        if all(isinstance(d, int) for d in flat):
            arr = np.asarray(flat, dtype=np.int64).astype(value.dtype.numpy)
        else:
            arr = np.empty(len(flat), dtype=object)
            arr[:] = flat
        return ArrayData(arr.reshape(value.array.shape), value.dtype)
    if isinstance(value, TensorData):
        return value
    if isinstance(value, (list, tuple)):
        items = [_sub_value(v, bindings) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        return type(value)(items) if isinstance(value, list) else tuple(items)
    return value


def substitute_symbols(graph: Graph, bindings: Mapping[str, Dim]) -> int:
    """Replace symbols everywhere in ``graph`` (``{"S": 1}`` fixes S, ``{"S": Sym("T")}``
    renames it); returns how many ops and inputs changed. Types are inferred again and
    the ``tract_assert`` lines of ``graph.info`` follow (see :func:`rewrite_assertions`)."""
    if not bindings:
        return 0
    changed = 0
    for v in graph.inputs:
        shape = Shape([substitute(d, bindings) for d in v.type.shape])
        if shape != v.type.shape:
            graph.set_input_type(v, v.type.with_shape(shape))
            changed += 1
    names = {k: v for k, v in bindings.items() if isinstance(v, Sym) and str(v) in v.symbols()}
    for op in graph.ops():
        attrs = dict(op.attrs)
        for key, value in op.attrs.items():
            if key in SYMBOL_NAME_ATTRS.get(op.kind, ()) and isinstance(value, str) and value in bindings:
                if value not in names:
                    raise ValueError(f"{op.kind} names symbol {value} in attribute {key}: it can be "
                                     "renamed but not fixed to a size")
                attrs[key] = str(names[value])
            else:
                attrs[key] = _sub_value(value, bindings)
        if any(attrs[k] is not op.attrs[k] for k in attrs):
            graph.replace_attrs(op, attrs)
            changed += 1
    graph.reinfer()
    info = graph.info
    info.custom_extensions = rewrite_assertions(info.custom_extensions, bindings)
    info.symbols = {str(substitute(Sym(k), bindings)): v for k, v in info.symbols.items()
                    if isinstance(substitute(Sym(k), bindings), Sym)}
    return changed


_ASSERT = re.compile(r"tract_assert\s+(?:([A-Za-z_][A-Za-z0-9_]*)\s*:(?!=)\s*)?(.*)\Z", re.S)
_CMP = re.compile(r"(>=|<=|==|<|>)")


def assertion_symbols(line: str) -> frozenset[str]:
    """The symbols a ``tract_assert [scenario:] A op B`` line names (empty for others)."""
    m = _ASSERT.match(line.strip())
    if not m:
        return frozenset()
    return frozenset(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", m.group(2)))


def rewrite_assertions(lines: Iterable[str], bindings: Mapping[str, Dim]) -> list[str]:
    """``tract_assert`` lines with ``bindings`` applied to both sides; a line left with no
    symbol (``1 >= 1`` once ``S`` is fixed to 1) is dropped, as are repeats. Other lines
    are kept as they are."""
    out: list[str] = []
    for line in lines:
        m = _ASSERT.match(line.strip())
        if not m or not (assertion_symbols(line) & bindings.keys()):
            new: str | None = line
        else:
            new = _rewrite(m.group(1), m.group(2), bindings)
        if new is not None and new not in out:
            out.append(new)
    return out


def _rewrite(scenario: str | None, body: str, bindings: Mapping[str, Dim]) -> str | None:
    parts = _CMP.split(body)
    if len(parts) != 3:
        return None
    try:
        sides = [parse_dim(parts[0]), parse_dim(parts[2])]
    except DimParseError:
        return None
    sides = [substitute(s, bindings) for s in sides]
    if not any(isinstance(s, Sym) for s in sides):
        return None
    head = f"tract_assert {scenario}: " if scenario else "tract_assert "
    return f"{head}{sides[0]} {parts[1]} {sides[1]}"


def graph_symbols(graph: Graph) -> frozenset[str]:
    """The symbols of the graph's types and known sizes (those the renderer declares)."""
    return frozenset().union(*(v.symbols() for v in graph.values()))


def require_symbols(graph: Graph, names: Iterable[str], key: str) -> None:
    """Refuse, as a plan error under ``key``, symbol names the graph does not have."""
    present = graph_symbols(graph)
    missing = sorted(set(names) - present)
    if missing:
        raise RemodelPlanError(key, f"the graph has no symbol {', '.join(missing)} (it has "
                                    f"{', '.join(sorted(present)) or 'none'})")


def prune_assertions(graph: Graph) -> int:
    """Drop ``tract_assert`` lines naming a symbol the graph no longer has; returns how many."""
    present = graph_symbols(graph)
    before = graph.info.custom_extensions
    kept = [line for line in before if assertion_symbols(line) <= present]
    graph.info.custom_extensions = kept
    return len(before) - len(kept)
