"""The syntax tree of an NNEF document, and its canonical text.

Expressions are small frozen records. The text of an expression is what t2n's
renderer writes for it (literals through :func:`~t2n.backends.nnef.context.literal`,
``k = v`` keyword arguments, ``, `` separators), so reading a graph t2n wrote and
printing it again gives the same characters. A :class:`Slot` stands for the ``i``-th
operand of a statement in the IR (``$i`` in text); a :class:`Dim` literal holds a
symbolic size (``S``, ``2 * S + 1``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import attrs

from t2n.backends.nnef.context import literal
from t2n.ir.dims import Sym


@attrs.frozen
class Literal:
    """A number, string or logical literal."""

    value: bool | int | float | str


@attrs.frozen
class Dim:
    """A size expression over symbols (``S``, ``S * 3``), folded into a :class:`Sym`."""

    value: Sym


@attrs.frozen
class Ident:
    """A name not yet resolved: a tensor, a symbol or a fragment parameter."""

    name: str


@attrs.frozen
class Slot:
    """Operand ``index`` of the IR op that holds the expression."""

    index: int


@attrs.frozen
class Array:
    items: tuple[Expr, ...]


@attrs.frozen
class Tuple:
    items: tuple[Expr, ...]


@attrs.frozen
class Call:
    """``name<generic>(args, key = value)``."""

    name: str
    args: tuple[Expr, ...] = ()
    kwargs: tuple[tuple[str, Expr], ...] = ()
    generic: str | None = None

    def kwarg(self, key: str) -> Expr | None:
        for k, v in self.kwargs:
            if k == key:
                return v
        return None


@attrs.frozen
class Binary:
    """``left op right`` with ``op`` one of ``+ - * / ^ < > <= >= == != && ||``."""

    op: str
    left: Expr
    right: Expr


@attrs.frozen
class Unary:
    """``-x``, ``+x`` or ``!x`` (Khronos syntax; tract reads none of them)."""

    op: str
    operand: Expr


@attrs.frozen
class Index:
    """``base[index]``."""

    base: Expr
    index: Expr


Expr = Literal | Dim | Ident | Slot | Array | Tuple | Call | Binary | Unary | Index

BINARY_PRECEDENCE = {"||": 1, "&&": 2, "<": 3, ">": 3, "<=": 3, ">=": 3, "==": 3, "!=": 3,
                     "+": 4, "-": 4, "*": 5, "/": 5, "^": 6}
"""Tighter binds higher; ``^`` groups to the right, the others to the left."""

BINARY_OPS = {"+": "add", "-": "sub", "*": "mul", "/": "div", "^": "pow", "<": "lt", ">": "gt",
              "<=": "le", ">=": "ge", "==": "eq", "!=": "ne", "&&": "and", "||": "or"}
"""The operation each binary operator stands for."""


@attrs.frozen
class Param:
    """A fragment parameter or result: its name, type text and default value."""

    name: str
    type: str
    default: Expr | None = None

    @property
    def is_tensor(self) -> bool:
        return self.type.startswith("tensor")


@attrs.frozen
class Assignment:
    """``lhs = rhs;`` where ``lhs`` is one name, a tuple or an array of names."""

    targets: tuple[str, ...]
    rhs: Expr
    form: str = "one"
    """``one``, ``tuple`` (``(a, b) = ...``) or ``array`` (``[a, b] = ...``)."""


@attrs.frozen
class Fragment:
    """A fragment definition; ``text`` is its source exactly as written."""

    name: str
    params: tuple[Param, ...]
    results: tuple[Param, ...]
    body: tuple[Assignment, ...] | None
    text: str
    generic: str | None = None


@attrs.frozen
class Graph:
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    body: tuple[Assignment, ...]


@attrs.frozen
class Document:
    version: str
    extensions: tuple[str, ...]
    fragments: tuple[Fragment, ...]
    graph: Graph


def children(e: Expr) -> Iterator[Expr]:
    if isinstance(e, (Array, Tuple)):
        yield from e.items
    elif isinstance(e, Call):
        yield from e.args
        for _, v in e.kwargs:
            yield v
    elif isinstance(e, Binary):
        yield e.left
        yield e.right
    elif isinstance(e, Unary):
        yield e.operand
    elif isinstance(e, Index):
        yield e.base
        yield e.index


def walk(e: Expr) -> Iterator[Expr]:
    """``e`` and every expression inside it, parents first."""
    yield e
    for c in children(e):
        yield from walk(c)


def rebuild(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """``e`` with each sub-expression for which ``fn`` gives a replacement replaced
    (children first are left alone where ``fn`` answers for the parent)."""
    new = fn(e)
    if new is not None:
        return new
    if isinstance(e, Array):
        return Array(tuple(rebuild(x, fn) for x in e.items))
    if isinstance(e, Tuple):
        return Tuple(tuple(rebuild(x, fn) for x in e.items))
    if isinstance(e, Call):
        return attrs.evolve(e, args=tuple(rebuild(x, fn) for x in e.args),
                            kwargs=tuple((k, rebuild(v, fn)) for k, v in e.kwargs))
    if isinstance(e, Binary):
        return Binary(e.op, rebuild(e.left, fn), rebuild(e.right, fn))
    if isinstance(e, Unary):
        return Unary(e.op, rebuild(e.operand, fn))
    if isinstance(e, Index):
        return Index(rebuild(e.base, fn), rebuild(e.index, fn))
    return e


def calls(e: Expr) -> Iterator[Call]:
    return (x for x in walk(e) if isinstance(x, Call))


def to_text(e: Expr, slot: Callable[[int], str] | None = None) -> str:
    """The canonical text of ``e``; operands are ``$i`` unless ``slot`` names them."""
    return _Printer(slot).expr(e, 0)


class _Printer:
    def __init__(self, slot: Callable[[int], str] | None) -> None:
        self.slot = slot

    def expr(self, e: Expr, outer: int) -> str:
        if isinstance(e, Literal):
            return literal(e.value)
        if isinstance(e, Dim):
            return str(e.value)
        if isinstance(e, Ident):
            return e.name
        if isinstance(e, Slot):
            return self.slot(e.index) if self.slot is not None else f"${e.index}"
        if isinstance(e, Array):
            return "[" + ", ".join(self.expr(x, 0) for x in e.items) + "]"
        if isinstance(e, Tuple):
            return "(" + ", ".join(self.expr(x, 0) for x in e.items) + ")"
        if isinstance(e, Call):
            parts = [self.expr(x, 0) for x in e.args]
            parts += [f"{k} = {self.expr(v, 0)}" for k, v in e.kwargs]
            generic = f"<{e.generic}>" if e.generic is not None else ""
            return f"{e.name}{generic}({', '.join(parts)})"
        if isinstance(e, Binary):
            p = BINARY_PRECEDENCE[e.op]
            right_assoc = e.op == "^"
            left = self.expr(e.left, p + 1 if right_assoc else p)
            right = self.expr(e.right, p if right_assoc else p + 1)
            text = f"{left} {e.op} {right}"
            return f"({text})" if p < outer else text
        if isinstance(e, Unary):
            text = f"{e.op}{self.expr(e.operand, 7)}"
            return f"({text})" if outer > 7 else text
        if isinstance(e, Index):
            return f"{self.expr(e.base, 8)}[{self.expr(e.index, 0)}]"
        raise TypeError(f"not an NNEF expression: {e!r}")


def size_value(e: Expr, is_symbol: Callable[[str], bool]) -> int | Sym | None:
    """The size ``e`` stands for (integers and symbols under ``+ - * /``, ``/`` rounding
    down as in tract's sizes), or None when it is not such an expression."""
    if isinstance(e, Literal):
        return e.value if isinstance(e.value, int) and not isinstance(e.value, bool) else None
    if isinstance(e, Dim):
        return e.value
    if isinstance(e, Ident):
        return Sym(e.name) if is_symbol(e.name) else None
    if isinstance(e, Unary) and e.op == "-":
        v = size_value(e.operand, is_symbol)
        return None if v is None else -v  # type: ignore[return-value]
    if isinstance(e, Binary) and e.op in ("+", "-", "*", "/"):
        a, b = size_value(e.left, is_symbol), size_value(e.right, is_symbol)
        if a is None or b is None:
            return None
        if e.op == "+":
            return a + b  # type: ignore[return-value]
        if e.op == "-":
            return a - b  # type: ignore[return-value]
        if e.op == "*":
            return a * b  # type: ignore[return-value]
        if isinstance(b, Sym) or b == 0:
            return None
        return a // b  # type: ignore[return-value]
    return None


def fold_sizes(e: Expr, is_symbol: Callable[[str], bool]) -> Expr:
    """``e`` with every size expression over symbols (``S``, ``S * 3 + 1``) as one
    :class:`Dim` (its canonical text is then ``str`` of the :class:`Sym`)."""

    def fold(x: Expr) -> Expr | None:
        if not isinstance(x, (Ident, Binary, Unary)):
            return None
        v = size_value(x, is_symbol)
        if v is None or not any(isinstance(y, (Ident, Dim)) for y in walk(x)):
            return None
        return Dim(v) if isinstance(v, Sym) else Literal(int(v))

    return rebuild(e, fold)
