"""Symbolic dimensions.

A dimension is an ``int`` or a :class:`Sym`: an integer polynomial over named
symbols (and floor divisions of such polynomials by constants, and minima and maxima
of dimensions: PyTorch clamps slice bounds). Arithmetic normalizes, and a result with
no symbol left collapses back to ``int``, so ``Sym("S") * 2 - Sym("S") * 2 == 0``.
``str()`` gives an expression that both the tract NNEF parser and humans read:
``2 * S + 1``, ``(S + -3) / 2``, ``min(S, 1000)``.

Every symbol stands for a size: at least 1 (t2n asserts ``S >= 1`` for dynamic axes),
or at least 0 for a length computed from tensor data (:func:`data_dim`).
:func:`lower_bound` and :func:`decide` use that to settle comparisons such as
``S // 2 <= S`` or ``min(S, 8) <= S``; what they cannot settle stays symbolic or raises
:class:`SymbolicComparisonError`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Union

import numpy as np

from t2n.errors import IRError, IRLookupError

Dim = Union[int, "Sym"]

_SYMBOL_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SymbolicComparisonError(IRError, TypeError):
    """Raised when an order comparison of symbolic dimensions cannot be decided."""


class DimParseError(IRError, ValueError):
    """Text that is not a dimension expression, or a symbol name that is not an identifier."""


class UnboundSymbolError(IRLookupError):
    """A symbolic dimension was evaluated without a value for one of its symbols."""


class _FloorDiv:
    """Atom ``floor(num / den)`` for a polynomial that does not divide exactly."""

    __slots__ = ("num", "den")

    def __init__(self, num: Sym, den: int) -> None:
        self.num = num
        self.den = den

    def key(self) -> str:
        return f"~({self.num})/{self.den}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _FloorDiv) and self.num == other.num and self.den == other.den

    def __hash__(self) -> int:
        return hash((self.num, self.den))


class _Extremum:
    """Atom ``min(args)`` or ``max(args)`` (``kind``) of dimensions no rule could order."""

    __slots__ = ("kind", "args")

    def __init__(self, kind: str, args: tuple[Dim, ...]) -> None:
        self.kind = kind
        self.args = args

    def key(self) -> str:
        return f"{self.kind}({', '.join(str(a) for a in self.args)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Extremum) and self.kind == other.kind and self.args == other.args

    def __hash__(self) -> int:
        return hash((self.kind, self.args))


_Atom = str | _FloorDiv | _Extremum
_Monomial = tuple[_Atom, ...]


def _atom_key(atom: _Atom) -> str:
    return atom if isinstance(atom, str) else atom.key()


def _mono_key(mono: _Monomial) -> tuple[bool, int, tuple[str, ...]]:
    return (len(mono) == 0, len(mono), tuple(_atom_key(a) for a in mono))


class Sym:
    """A symbolic dimension expression. Immutable, hashable, compared by value."""

    __slots__ = ("_terms", "_hash")

    _terms: tuple[tuple[_Monomial, int], ...]

    def __init__(self, name: str) -> None:
        if not _SYMBOL_RE.match(name):
            raise DimParseError(f"invalid symbol name {name!r}: use letters, digits and _, "
                                "not starting with a digit")
        self._terms = (((name,), 1),)
        self._hash = hash(self._terms)

    # -- construction -------------------------------------------------------------
    @classmethod
    def _from_terms(cls, terms: Mapping[_Monomial, int]) -> Dim:
        clean = {m: c for m, c in terms.items() if c != 0}
        if not clean:
            return 0
        if list(clean) == [()]:
            return clean[()]
        obj = object.__new__(cls)
        obj._terms = tuple(sorted(clean.items(), key=lambda mc: _mono_key(mc[0])))
        obj._hash = hash(obj._terms)
        return obj

    @staticmethod
    def _terms_of(x: Dim) -> dict[_Monomial, int]:
        if isinstance(x, Sym):
            return dict(x._terms)
        return {(): int(x)} if int(x) != 0 else {}

    # -- queries ------------------------------------------------------------------
    def symbols(self) -> frozenset[str]:
        out: set[str] = set()
        for mono, _ in self._terms:
            for atom in mono:
                if isinstance(atom, str):
                    out.add(atom)
                elif isinstance(atom, _FloorDiv):
                    out |= atom.num.symbols()
                else:
                    out |= dim_symbols(atom.args)
        return frozenset(out)

    def evaluate(self, bindings: Mapping[str, int]) -> int:
        """The value of the expression with every symbol bound."""
        total = 0
        for mono, coef in self._terms:
            value = coef
            for atom in mono:
                if isinstance(atom, str):
                    if atom not in bindings:
                        raise UnboundSymbolError(
                            f"symbol {atom} of {self} has no value (given: {sorted(bindings) or 'none'})"
                        )
                    value *= int(bindings[atom])
                elif isinstance(atom, _FloorDiv):
                    value *= atom.num.evaluate(bindings) // atom.den
                else:
                    vals = [a.evaluate(bindings) if isinstance(a, Sym) else int(a) for a in atom.args]
                    value *= min(vals) if atom.kind == "min" else max(vals)
            total += value
        return total

    def substitute(self, bindings: Mapping[str, Dim]) -> Dim:
        """Replace some symbols by ints or other expressions."""
        total: Dim = 0
        for mono, coef in self._terms:
            value: Dim = coef
            for atom in mono:
                if isinstance(atom, str):
                    value = value * bindings.get(atom, Sym(atom))
                elif isinstance(atom, _FloorDiv):
                    num = atom.num.substitute(bindings)
                    value = value * (num // atom.den)
                else:
                    args = [a.substitute(bindings) if isinstance(a, Sym) else a for a in atom.args]
                    value = value * (sym_min(*args) if atom.kind == "min" else sym_max(*args))
            total = total + value
        return total

    @property
    def constant_term(self) -> int:
        return dict(self._terms).get((), 0)

    # -- arithmetic ---------------------------------------------------------------
    def __add__(self, other: Dim) -> Dim:
        if not isinstance(other, (Sym, int, np.integer)):
            return NotImplemented
        terms = self._terms_of(self)
        for mono, coef in self._terms_of(other).items():
            terms[mono] = terms.get(mono, 0) + coef
        return Sym._from_terms(terms)

    __radd__ = __add__

    def __neg__(self) -> Dim:
        return Sym._from_terms({m: -c for m, c in self._terms})

    def __sub__(self, other: Dim) -> Dim:
        if not isinstance(other, (Sym, int, np.integer)):
            return NotImplemented
        return self + (-other)

    def __rsub__(self, other: Dim) -> Dim:
        if not isinstance(other, (Sym, int, np.integer)):
            return NotImplemented
        return (-self) + other

    def __mul__(self, other: Dim) -> Dim:
        if not isinstance(other, (Sym, int, np.integer)):
            return NotImplemented
        terms: dict[_Monomial, int] = {}
        for m1, c1 in self._terms_of(self).items():
            for m2, c2 in self._terms_of(other).items():
                mono = tuple(sorted(m1 + m2, key=_atom_key))
                terms[mono] = terms.get(mono, 0) + c1 * c2
        return Sym._from_terms(terms)

    __rmul__ = __mul__

    def __floordiv__(self, other: Dim) -> Dim:
        if isinstance(other, Sym):
            exact = self._divide_by_monomial(other)
            if exact is None:
                raise SymbolicComparisonError(f"cannot divide {self} by symbolic {other}")
            return exact
        if not isinstance(other, (int, np.integer)):
            return NotImplemented
        den = int(other)
        if den <= 0:
            raise ZeroDivisionError(f"symbolic division by {den}")
        if den == 1:
            return self
        const = self.constant_term
        rest = {m: c for m, c in self._terms if m != ()}
        if all(c % den == 0 for c in rest.values()):
            return Sym._from_terms({m: c // den for m, c in rest.items()}) + const // den
        return Sym._from_terms({(_FloorDiv(self, den),): 1})

    def _proportional_to(self, other: Sym) -> int | None:
        """``k`` when ``self == k * other`` for an integer ``k`` (e.g. ``32*X + 32`` over
        ``8*X + 8``, the element count over a row size in a reshape), else None."""
        mono, coef = other._terms[0]
        mine = dict(self._terms).get(mono, 0)
        if coef == 0 or mine % coef:
            return None
        k = mine // coef
        return k if self - other * k == 0 else None

    def _divide_by_monomial(self, other: Sym) -> Dim | None:
        """``self / other`` when ``other`` is one term dividing every term exactly."""
        if len(other._terms) != 1:
            return self._proportional_to(other)
        (dmono, dcoef), = other._terms
        out: dict[_Monomial, int] = {}
        for mono, coef in self._terms:
            rest = list(mono)
            for atom in dmono:
                if atom not in rest:
                    return None
                rest.remove(atom)
            if coef % dcoef:
                return None
            out[tuple(rest)] = out.get(tuple(rest), 0) + coef // dcoef
        return Sym._from_terms(out)

    def __rfloordiv__(self, other: Dim) -> Dim:
        raise SymbolicComparisonError(f"cannot divide {other} by symbolic {self}")

    def __mod__(self, other: Dim) -> Dim:
        if not isinstance(other, (int, np.integer)):
            return NotImplemented
        return self - (self // int(other)) * int(other)

    def __truediv__(self, other: Dim) -> Dim:
        return self.__floordiv__(other)

    # -- comparisons --------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sym):
            return self._terms == other._terms
        return False

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return self._hash

    def _undecidable(self, other: object) -> bool:
        raise SymbolicComparisonError(f"cannot order symbolic {self} against {other}")

    def __lt__(self, other: object) -> bool:
        return self._undecidable(other)

    def __le__(self, other: object) -> bool:
        return self._undecidable(other)

    def __gt__(self, other: object) -> bool:
        return self._undecidable(other)

    def __ge__(self, other: object) -> bool:
        return self._undecidable(other)

    def __bool__(self) -> bool:
        return True

    def __index__(self) -> int:
        raise SymbolicComparisonError(f"symbolic dimension {self} has no int value")

    # -- text ---------------------------------------------------------------------
    def __str__(self) -> str:
        ordered = [t for t in self._terms if t[1] > 0] + [t for t in self._terms if t[1] < 0]
        out = ""
        for i, (mono, coef) in enumerate(ordered):
            shown_coef = coef if i == 0 else abs(coef)
            alone = len(mono) == 1 and shown_coef == 1
            factors = [
                a if isinstance(a, str)
                else a.key() if isinstance(a, _Extremum)
                else (f"({a.num}) / {a.den}" if alone else f"(({a.num}) / {a.den})")
                for a in mono
            ]
            # The first term keeps its sign as a literal (NNEF has no unary minus);
            # later ones are joined with a binary + or -.
            shown = coef if i == 0 else abs(coef)
            if not factors:
                text = str(shown)
            elif shown == 1:
                text = " * ".join(factors)
            else:
                text = " * ".join([str(shown), *factors])
            out = text if i == 0 else f"{out} {'-' if coef < 0 else '+'} {text}"
        return out

    def __repr__(self) -> str:
        return f"Sym({str(self)!r})"


def is_static(dim: Dim) -> bool:
    return not isinstance(dim, Sym)


def dim_symbols(dims: Iterable[Dim]) -> frozenset[str]:
    out: frozenset[str] = frozenset()
    for d in dims:
        if isinstance(d, Sym):
            out |= d.symbols()
    return out


def as_dim(x: object) -> Dim:
    """Normalize an int-like or Sym into a Dim."""
    if isinstance(x, Sym):
        return x
    if isinstance(x, (bool, np.bool_)):
        return int(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    raise TypeError(f"not a dimension: {x!r}")


def valid_symbol_name(name: str) -> bool:
    return bool(_SYMBOL_RE.match(name))


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


DATA_SYMBOL_PREFIX = "_data_"
"""Symbols named so stand for a length computed from tensor data (``arange(n)`` with
``n`` an input): the engine names such a length itself (tract's ``range`` makes a fresh
symbol), so they are never declared nor written in a graph."""


def data_dim(tag: str) -> Sym:
    """The length of one data-sized axis (``tag`` unique in its graph)."""
    return Sym(DATA_SYMBOL_PREFIX + tag)


def is_data_symbol(name: str) -> bool:
    return name.startswith(DATA_SYMBOL_PREFIX)


def has_sym(arr: np.ndarray) -> bool:
    """Whether an array of known sizes holds a symbolic one (object arrays only can)."""
    arr = np.asarray(arr)
    return arr.dtype == object and any(isinstance(d, Sym) for d in arr.reshape(-1).tolist())


# -- minima, maxima and what is known of sizes -----------------------------------------

def sym_min(*args: Dim) -> Dim:
    """``min(args)``: an int, one argument when it is provably the least, else an atom."""
    return _extremum("min", args)


def sym_max(*args: Dim) -> Dim:
    """``max(args)``: an int, one argument when it is provably the greatest, else an atom."""
    return _extremum("max", args)


def _extremum(kind: str, args: Iterable[Dim]) -> Dim:
    flat: list[Dim] = []
    for a in args:
        a = as_dim(a)
        inner = _single_atom(a)
        if isinstance(inner, _Extremum) and inner.kind == kind:
            flat.extend(inner.args)
        else:
            flat.append(a)
    keep: list[Dim] = []
    for a in flat:
        if any(b == a or _better(kind, b, a) for b in keep):
            continue
        keep = [b for b in keep if not _better(kind, a, b)] + [a]
    if not keep:
        raise ValueError(f"{kind}() of no dimension")
    if len(keep) == 1:
        return keep[0]
    ordered = tuple(sorted(keep, key=lambda d: (isinstance(d, Sym), str(d))))
    return Sym._from_terms({(_Extremum(kind, ordered),): 1})


def _single_atom(d: Dim) -> _Atom | None:
    if isinstance(d, Sym) and len(d._terms) == 1:
        (mono, coef), = d._terms
        if coef == 1 and len(mono) == 1:
            return mono[0]
    return None


def _better(kind: str, a: Dim, b: Dim) -> bool:
    """``a`` provably makes ``b`` useless in ``kind(a, b)`` (a <= b for min)."""
    return provably_ge(b, a) if kind == "min" else provably_ge(a, b)


def provably_ge(a: Dim, b: Dim, depth: int = 0) -> bool:
    """``a >= b`` for every size: from bounds of ``a - b``, or argument by argument
    through minima and maxima (``min(1000, S) >= min(5, S)``)."""
    lo = lower_bound(as_dim(a) - as_dim(b))
    if lo is not None and lo >= 0:
        return True
    if depth > 4:
        return False
    ea, eb = _single_atom(as_dim(a)), _single_atom(as_dim(b))
    if isinstance(eb, _Extremum) and eb.kind == "min" and any(provably_ge(a, x, depth + 1) for x in eb.args):
        return True
    if isinstance(ea, _Extremum) and ea.kind == "max" and any(provably_ge(x, b, depth + 1) for x in ea.args):
        return True
    if isinstance(ea, _Extremum) and ea.kind == "min" and all(provably_ge(x, b, depth + 1) for x in ea.args):
        return True
    return isinstance(eb, _Extremum) and eb.kind == "max" and all(provably_ge(a, x, depth + 1) for x in eb.args)


def symbol_lower_bound(name: str) -> int:
    """Sizes are at least 1 (the dynamic axes t2n asserts non-empty), lengths computed
    from tensor data at least 0."""
    return 0 if is_data_symbol(name) else 1


_Poly = dict[tuple[str, ...], Fraction]
_LIMIT = 64


def lower_bound(d: Dim) -> int | None:
    """A lower bound of ``d`` over every size its symbols may take (None: unbounded as
    far as these rules see). Floor divisions, minima and maxima are relaxed to
    polynomials that stay below them, so that correlated terms cancel
    (``S - S // 2 >= 1``, ``S - min(S, 8) >= 0``); a dimension is an integer, so the
    bound is rounded up."""
    if not isinstance(d, Sym):
        return int(d)
    best: Fraction | None = None
    for poly in _lower_polys(d):
        value = _poly_lower_value(poly)
        if value is not None and (best is None or value > best):
            best = value
    return None if best is None else math.ceil(best)


def upper_bound(d: Dim) -> int | None:
    lo = lower_bound(-d if isinstance(d, Sym) else -int(d))
    return None if lo is None else -lo


def decide(op: str, a: Dim, b: Dim) -> bool:
    """``a op b`` for ``op`` in lt, le, gt, ge, eq, ne, settled for every size the symbols
    may take; raises :class:`SymbolicComparisonError` when these rules cannot tell."""
    if not isinstance(a, Sym) and not isinstance(b, Sym):
        return bool({"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b, "eq": a == b, "ne": a != b}[op])
    diff = as_dim(b) - as_dim(a)  # b - a
    lo, hi = lower_bound(diff), upper_bound(diff)
    b_ge_a, a_ge_b = provably_ge(b, a), provably_ge(a, b)
    b_gt_a, a_gt_b = provably_ge(b, as_dim(a) + 1), provably_ge(a, as_dim(b) + 1)
    facts = {"lt": (b_gt_a, a_ge_b), "le": (b_ge_a, a_gt_b),
             "gt": (a_gt_b, b_ge_a), "ge": (a_ge_b, b_gt_a)}
    if op in facts:
        yes, no = facts[op]
    else:
        yes = diff == 0 if isinstance(diff, int) else False
        no = (lo is not None and lo > 0) or (hi is not None and hi < 0) or (isinstance(diff, int) and diff != 0)
        if op == "ne":
            yes, no = no, yes
    if yes:
        return True
    if no:
        return False
    raise SymbolicComparisonError(f"cannot decide {a} {op} {b} for every size")


def _add_poly(a: _Poly, b: _Poly) -> _Poly:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, Fraction(0)) + v
    return {k: v for k, v in out.items() if v != 0}


def _scale(a: _Poly, c: Fraction) -> _Poly:
    return {k: v * c for k, v in a.items() if v * c != 0}


def _poly_lower_value(poly: _Poly) -> Fraction | None:
    total = Fraction(0)
    for mono, coef in poly.items():
        if not mono:
            total += coef
        elif coef < 0:
            return None
        else:
            prod = 1
            for name in mono:
                prod *= symbol_lower_bound(name)
            total += coef * prod
    return total


def _lower_polys(d: Dim) -> list[_Poly]:
    """Polynomials over plain symbols that are <= ``d`` for every size."""
    if not isinstance(d, Sym):
        return [{(): Fraction(int(d))}] if int(d) else [{}]
    results: list[_Poly] = [{}]
    for mono, coef in d._terms:
        options = _mono_lower(mono, Fraction(coef))
        results = [_add_poly(r, o) for r in results for o in options][:_LIMIT]
        if not results:
            return []
    return results


def _upper_polys(d: Dim) -> list[_Poly]:
    neg = -d if isinstance(d, Sym) else -int(d)
    return [_scale(p, Fraction(-1)) for p in _lower_polys(neg)]


def _mono_lower(mono: _Monomial, coef: Fraction) -> list[_Poly]:
    """Polynomials <= ``coef * mono``."""
    if not mono:
        return [{(): coef}]
    if all(isinstance(a, str) for a in mono):
        return [{tuple(sorted(a for a in mono if isinstance(a, str))): coef}]
    if len(mono) == 1:
        atom = mono[0]
        if isinstance(atom, _FloorDiv):
            den = Fraction(atom.den)
            if coef > 0:  # floor(P / d) >= (P - (d - 1)) / d
                return [_scale(_add_poly(p, {(): -(den - 1)}), coef / den) for p in _lower_polys(atom.num)]
            return [_scale(p, coef / den) for p in _upper_polys(atom.num)]  # floor(P / d) <= P / d
        if isinstance(atom, _Extremum):
            if (atom.kind == "max") == (coef > 0):  # max >= each argument; -min >= -each argument
                return [_scale(p, coef) for a in atom.args
                        for p in (_lower_polys(a) if coef > 0 else _upper_polys(a))][:_LIMIT]
            bounds = [lower_bound(a) if coef > 0 else upper_bound(a) for a in atom.args]
            if any(b is None for b in bounds):
                return []
            known = [b for b in bounds if b is not None]
            return [{(): coef * (min(known) if coef > 0 else max(known))}]
    if coef > 0:  # a product with other atoms: a constant bound when every factor is >= 0
        prod = Fraction(1)
        for atom in mono:
            lo = Fraction(symbol_lower_bound(atom)) if isinstance(atom, str) else lower_bound(Sym._from_terms({(atom,): 1}))
            if lo is None or lo < 0:
                return []
            prod *= lo
        return [{(): coef * prod}]
    return []
