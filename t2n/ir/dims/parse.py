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
    parser = _DimParser(text)
    result = parser.expr()
    if parser.pos != len(parser.tokens):
        raise parser.fail(f"unexpected {parser.tokens[parser.pos]!r} after "
                          f"{' '.join(parser.tokens[:parser.pos])!r}")
    return result


class _DimParser:
    """Recursive descent over the tokens of one text: ``expr`` is terms joined by + and -,
    a term atoms joined by * and /, an atom a number, a symbol, a negation, a
    parenthesis or ``min(...)`` / ``max(...)``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _dim_tokens(text)
        self.pos = 0

    def fail(self, why: str) -> DimParseError:
        return DimParseError(f"cannot parse dimension {self.text!r}: {why}")

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        if self.pos >= len(self.tokens):
            raise self.fail("it ends where a value is expected" if self.tokens else "it is empty")
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    def close(self, why: str) -> None:
        """Take the ``)`` that must come next."""
        if self.peek() != ")":
            raise self.fail(why)
        self.take()

    def atom(self) -> Dim:
        tok = self.take()
        if tok == "(":
            val = self.expr()
            self.close("a parenthesis is not closed")
            return val
        if tok == "-":
            return -self.atom()
        if tok.isdigit():
            return int(tok)
        if tok in "()+-*/,":
            raise self.fail(f"unexpected {tok!r}")
        if tok in ("min", "max") and self.peek() == "(":
            return self.extremum(tok)
        return Sym(tok)

    def extremum(self, kind: str) -> Dim:
        """``min(a, b, ...)`` or ``max(...)`` after its name, folded by the prover."""
        self.take()
        args = [self.expr()]
        while self.peek() == ",":
            self.take()
            args.append(self.expr())
        self.close(f"{kind}( is not closed")
        return sym_min(*args) if kind == "min" else sym_max(*args)

    def term(self) -> Dim:
        val = self.atom()
        while self.peek() in ("*", "/"):
            op = self.take()
            rhs = self.atom()
            if op == "/" and rhs == 0:
                raise self.fail("division by zero")
            val = val * rhs if op == "*" else val // rhs
        return val

    def expr(self) -> Dim:
        val = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            rhs = self.term()
            val = val + rhs if op == "+" else val - rhs
        return val
