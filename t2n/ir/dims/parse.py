"""Reading a dimension from text: the inverse of ``str()`` on a :class:`Sym`.

Plans, the NNEF reader and the IR text parser hand dimensions over as text
(``2 * S + 1``, ``min(S, 1000)``); anything else is refused with a
:class:`DimParseError`, never skipped.
"""

from __future__ import annotations

import re

from t2n.ir.dims.expr import Dim, DimParseError, Sym
from t2n.ir.dims.extrema import sym_max, sym_min

_DIM_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|([()+\-*/,]))")


def _dim_tokens(text: str) -> list[str]:
    """Every token of ``text``; anything that is not a token is refused, never skipped."""
    tokens: list[str] = []
    pos = 0
    while pos < len(text):
        m = _DIM_TOKEN.match(text, pos)
        if m is None:
            if text[pos:].strip() == "":
                break
            raise DimParseError(
                f"cannot parse dimension {text!r}: unexpected {text[pos:].lstrip()[0]!r} at "
                f"position {len(text) - len(text[pos:].lstrip())} (a dimension is an int, a "
                "symbol name, or + - * / and parentheses over them)"
            )
        tokens.append(m.group(m.lastindex or 0))
        pos = m.end()
    return tokens


def parse_dim(text: str) -> Dim:
    """Parse a dimension as printed by ``str()``: ints, symbols, + - * / and parentheses.

    Raises :class:`DimParseError` for anything else (a stray character, an empty
    text, an unbalanced parenthesis, a division by zero).
    """
    if not isinstance(text, str):
        raise DimParseError(f"a dimension expression is text, not {type(text).__name__} ({text!r})")
    tokens = _dim_tokens(text)
    pos = 0

    def fail(why: str) -> DimParseError:
        return DimParseError(f"cannot parse dimension {text!r}: {why}")

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        if pos >= len(tokens):
            raise fail("it ends where a value is expected" if tokens else "it is empty")
        tok = tokens[pos]
        pos += 1
        return tok

    def atom() -> Dim:
        tok = take()
        if tok == "(":
            val = expr()
            if peek() != ")":
                raise fail("a parenthesis is not closed")
            take()
            return val
        if tok == "-":
            return -atom()
        if tok.isdigit():
            return int(tok)
        if tok in "()+-*/,":
            raise fail(f"unexpected {tok!r}")
        if tok in ("min", "max") and peek() == "(":
            take()
            args = [expr()]
            while peek() == ",":
                take()
                args.append(expr())
            if peek() != ")":
                raise fail(f"{tok}( is not closed")
            take()
            return sym_min(*args) if tok == "min" else sym_max(*args)
        return Sym(tok)

    def term() -> Dim:
        val = atom()
        while peek() in ("*", "/"):
            op = take()
            rhs = atom()
            if op == "/" and rhs == 0:
                raise fail("division by zero")
            val = val * rhs if op == "*" else val // rhs
        return val

    def expr() -> Dim:
        val = term()
        while peek() in ("+", "-"):
            op = take()
            rhs = term()
            val = val + rhs if op == "+" else val - rhs
        return val

    result = expr()
    if pos != len(tokens):
        raise fail(f"unexpected {tokens[pos]!r} after {' '.join(tokens[:pos])!r}")
    return result
