"""The ``tract_assert`` bounds of an artifact, checked on the inputs of a check.

tract reads ``extension tract_assert S <= 4096;`` lines (and uses them to simplify
shapes) but does not refuse inputs that break them, so a check at a size the artifact
excludes would "pass" on a model nobody should run at that size. Before running, the
symbols' sizes are read from the inputs (an input axis declared as a bare symbol
gives its size; ``symbols=`` given to the check win) and every unnamed assertion whose
symbols are all known is evaluated. Named ones (``tract_assert pp: P == 0``) describe
alternative scenarios, not bounds, and are left to tract.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from t2n.errors import SymbolBoundsError

_ASSERT_LINE = re.compile(r"^\s*extension\s+tract_assert\s+([^;]+);", re.M)
_EXTERNAL = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*(?:tract_core_)?external\b[^;]*?shape\s*=\s*\[([^\]]*)\]", re.M)
_NAMED = re.compile(r"^\s*[A-Za-z_]\w*\s*:")
_SYMBOL = re.compile(r"[A-Za-z_]\w*\Z")

_BINARY: dict[type, Any] = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
                            ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_COMPARE: dict[type, Any] = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
                             ast.GtE: operator.ge, ast.Eq: operator.eq, ast.NotEq: operator.ne}


def assertions_of(graph_nnef: str) -> list[str]:
    """The ``tract_assert`` expressions of a graph.nnef text, in order."""
    return [m.group(1).strip() for m in _ASSERT_LINE.finditer(graph_nnef)]


def input_shapes_of(graph_nnef: str) -> dict[str, tuple[str, ...]]:
    """Input name → the sizes its ``external`` declares (as text)."""
    return {m.group(1): tuple(d.strip() for d in m.group(2).split(",") if d.strip())
            for m in _EXTERNAL.finditer(graph_nnef)}


def symbol_sizes(declared: Mapping[str, Sequence[object]], names: Sequence[str], arrays: Sequence[Any],
                 given: Mapping[str, int] | None) -> dict[str, int]:
    """Each symbol's size as the inputs give it (an axis declared as the bare symbol);
    ``given`` (the check's ``symbols=``) wins."""
    sizes: dict[str, int] = {}
    for name, arr in zip(names, arrays):
        shape = getattr(arr, "shape", None)
        dims = declared.get(name)
        if shape is None or dims is None or len(dims) != len(shape):
            continue
        for dim, size in zip(dims, shape):
            if isinstance(dim, str) and _SYMBOL.match(dim.strip()):
                sizes.setdefault(dim.strip(), int(size))
    sizes.update(dict(given or {}))
    return sizes


def _value(node: ast.AST, sizes: Mapping[str, int]) -> int | bool | None:
    """The value of an assertion's expression (None: it names an unknown symbol or uses
    something this evaluator does not know, so it is not checked)."""
    if isinstance(node, ast.Expression):
        return _value(node.body, sizes)
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name):
        return sizes.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _value(node.operand, sizes)
        return None if v is None else -v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        a, b = _value(node.left, sizes), _value(node.right, sizes)
        if a is None or b is None or (isinstance(node.op, (ast.FloorDiv, ast.Mod)) and b == 0):
            return None
        return int(_BINARY[type(node.op)](a, b))
    if isinstance(node, ast.Compare):
        left = _value(node.left, sizes)
        for op, right_node in zip(node.ops, node.comparators):
            right = _value(right_node, sizes)
            if left is None or right is None or type(op) not in _COMPARE:
                return None
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    return None


def broken(assertions: Iterable[str], sizes: Mapping[str, int]) -> list[str]:
    """The unnamed assertions that ``sizes`` make false."""
    out = []
    for text in assertions:
        if _NAMED.match(text):
            continue  # a named scenario (``pp: P == 0``): one among alternatives
        try:
            tree = ast.parse(text.replace("/", "//"), mode="eval")
        except SyntaxError:
            continue
        if _value(tree, sizes) is False:
            out.append(text)
    return out


def check_bounds(assertions: Sequence[str], declared: Mapping[str, Sequence[object]], names: Sequence[str],
                 arrays: Sequence[Any], given: Mapping[str, int] | None, where: str) -> None:
    """Refuse inputs whose sizes break an assertion of the artifact
    (:class:`SymbolBoundsError` naming each, with the sizes found)."""
    if not assertions:
        return
    sizes = symbol_sizes(declared, names, arrays, given)
    bad = broken(assertions, sizes)
    if bad:
        shown = ", ".join(f"{k} = {v}" for k, v in sorted(sizes.items()))
        raise SymbolBoundsError(
            f"the inputs give {where} the sizes {shown}, which its tract_assert line(s) exclude: "
            f"{'; '.join(bad)}. tract does not enforce these bounds (it would run anyway, outside "
            "what the artifact was made for): check at sizes inside them, or export with other bounds",
            bad, sizes)


__all__ = ["assertions_of", "broken", "check_bounds", "input_shapes_of", "symbol_sizes"]
