"""Symbolic dimension expressions: the :class:`Sym` class and its arithmetic.

A dimension is an ``int`` or a :class:`Sym`: an integer polynomial over named
symbols (and floor divisions of such polynomials by constants, and minima and maxima
of dimensions: PyTorch clamps slice bounds). Arithmetic normalizes, and a result with
no symbol left collapses back to ``int``, so ``Sym("S") * 2 - Sym("S") * 2 == 0``.
``str()`` gives an expression that both the tract NNEF parser and humans read:
``2 * S + 1``, ``(S + -3) / 2``, ``min(S, 1000)``.

This module is the bottom of :mod:`t2n.ir.dims`: it knows nothing of what a symbol
stands for nor of bounds. Ordering sizes, folding minima and maxima and substituting
symbols live in the modules above it (``bounds``, ``extrema``), which read the atoms
through :func:`single_atom`, :func:`atom_dim` and :attr:`Sym.terms`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
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


class FloorDiv:
    """Atom ``floor(num / den)`` for a polynomial that does not divide exactly."""

    __slots__ = ("num", "den")

    def __init__(self, num: Sym, den: int) -> None:
        self.num = num
        self.den = den

    def key(self) -> str:
        return f"~({self.num})/{self.den}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FloorDiv) and self.num == other.num and self.den == other.den

    def __hash__(self) -> int:
        return hash((self.num, self.den))


class Extremum:
    """Atom ``min(args)`` or ``max(args)`` (``kind``) of dimensions no rule could order."""

    __slots__ = ("kind", "args")

    def __init__(self, kind: str, args: tuple[Dim, ...]) -> None:
        self.kind = kind
        self.args = args

    def key(self) -> str:
        return f"{self.kind}({', '.join(str(a) for a in self.args)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Extremum) and self.kind == other.kind and self.args == other.args

    def __hash__(self) -> int:
        return hash((self.kind, self.args))


Atom = str | FloorDiv | Extremum
Monomial = tuple[Atom, ...]


def _atom_key(atom: Atom) -> str:
    return atom if isinstance(atom, str) else atom.key()


def _mono_key(mono: Monomial) -> tuple[bool, int, tuple[str, ...]]:
    return (len(mono) == 0, len(mono), tuple(_atom_key(a) for a in mono))


def _graded(mono: Monomial) -> tuple[int, tuple[str, ...]]:
    """A monomial order (degree, then the atoms' keys): what polynomial long division
    needs, since multiplying two monomials keeps their order."""
    return (len(mono), tuple(sorted((_atom_key(a) for a in mono), reverse=True)))


class Sym:
    """A symbolic dimension expression. Immutable, hashable, compared by value."""

    __slots__ = ("_terms", "_hash")

    _terms: tuple[tuple[Monomial, int], ...]

    def __init__(self, name: str) -> None:
        if not _SYMBOL_RE.match(name):
            raise DimParseError(f"invalid symbol name {name!r}: use letters, digits and _, "
                                "not starting with a digit")
        self._terms = (((name,), 1),)
        self._hash = hash(self._terms)

    # -- construction -------------------------------------------------------------
    @classmethod
    def _from_terms(cls, terms: Mapping[Monomial, int]) -> Dim:
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
    def _terms_of(x: Dim) -> dict[Monomial, int]:
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
                elif isinstance(atom, FloorDiv):
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
                elif isinstance(atom, FloorDiv):
                    value *= atom.num.evaluate(bindings) // atom.den
                else:
                    vals = [a.evaluate(bindings) if isinstance(a, Sym) else int(a) for a in atom.args]
                    value *= min(vals) if atom.kind == "min" else max(vals)
            total += value
        return total

    @property
    def terms(self) -> tuple[tuple[Monomial, int], ...]:
        """The (monomial, coefficient) pairs, in a fixed order; read by the prover."""
        return self._terms

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
        terms: dict[Monomial, int] = {}
        for m1, c1 in self._terms_of(self).items():
            for m2, c2 in self._terms_of(other).items():
                mono = tuple(sorted(m1 + m2, key=_atom_key))
                terms[mono] = terms.get(mono, 0) + c1 * c2
        return Sym._from_terms(terms)

    __rmul__ = __mul__

    def __floordiv__(self, other: Dim) -> Dim:
        if isinstance(other, Sym):
            exact = self._divide_exactly(other)
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
        return Sym._from_terms({(FloorDiv(self, den),): 1})

    def _proportional_to(self, other: Sym) -> int | None:
        """``k`` when ``self == k * other`` for an integer ``k`` (e.g. ``32*X + 32`` over
        ``8*X + 8``, the element count over a row size in a reshape), else None."""
        mono, coef = other._terms[0]
        mine = dict(self._terms).get(mono, 0)
        if coef == 0 or mine % coef:
            return None
        k = mine // coef
        return k if self - other * k == 0 else None

    def _divide_exactly(self, other: Sym) -> Dim | None:
        """``self / other`` when the division of the two polynomials leaves no remainder
        (``4*B*T*T`` over ``2*B*T``, the element count over the known sizes of a reshape
        such as the relative shift of Transformer-XL attention), else None. Long division
        under a graded order of the atoms (symbols and floor divisions alike)."""
        by_mono = self._divide_by_monomial(other)
        if by_mono is not None:
            return by_mono
        lead_mono, lead_coef = max(other._terms, key=lambda mc: _graded(mc[0]))
        remainder = self._terms_of(self)
        quotient: dict[Monomial, int] = {}
        for _ in range(64 * (len(remainder) + 1)):
            if not remainder:
                return Sym._from_terms(quotient)
            mono = max(remainder, key=_graded)
            coef = remainder[mono]
            rest = list(mono)
            for atom in lead_mono:
                if atom not in rest:
                    return None
                rest.remove(atom)
            if coef % lead_coef:
                return None
            factor_mono, factor = tuple(rest), coef // lead_coef
            quotient[factor_mono] = quotient.get(factor_mono, 0) + factor
            for dmono, dcoef in other._terms:
                prod = tuple(sorted(factor_mono + dmono, key=_atom_key))
                remainder[prod] = remainder.get(prod, 0) - factor * dcoef
                if remainder[prod] == 0:
                    del remainder[prod]
        return None

    def _divide_by_monomial(self, other: Sym) -> Dim | None:
        """``self / other`` when ``other`` is one term dividing every term exactly."""
        if len(other._terms) != 1:
            return self._proportional_to(other)
        (dmono, dcoef), = other._terms
        out: dict[Monomial, int] = {}
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
                else a.key() if isinstance(a, Extremum)
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


def single_atom(d: Dim) -> Atom | None:
    """The atom ``d`` is, when it is one atom alone (``S``, ``S // 2``, ``min(S, 8)``)."""
    if isinstance(d, Sym) and len(d.terms) == 1:
        (mono, coef), = d.terms
        if coef == 1 and len(mono) == 1:
            return mono[0]
    return None


def atom_dim(atom: Atom) -> Dim:
    """The dimension that is ``atom`` alone (the inverse of :func:`single_atom`)."""
    return Sym._from_terms({(atom,): 1})


def has_sym(arr: np.ndarray) -> bool:
    """Whether an array of known sizes holds a symbolic one (object arrays only can)."""
    arr = np.asarray(arr)
    return arr.dtype == object and any(isinstance(d, Sym) for d in arr.reshape(-1).tolist())
