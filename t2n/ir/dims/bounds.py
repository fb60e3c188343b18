"""The bounds prover: what is known of a dimension over every size its symbols may take.

:func:`lower_bound` relaxes floor divisions, minima and maxima to polynomials that stay
below them, so that correlated terms cancel (``S - S // 2 >= 1``); :func:`provably_ge`
and :func:`decide` settle comparisons from those bounds. Slice clamping, the folding of
minima and maxima (:mod:`t2n.ir.dims.extrema`) and the comparison evaluators ask it;
what it cannot settle stays symbolic or raises :class:`SymbolicComparisonError`.
"""

from __future__ import annotations

import math
from fractions import Fraction

from t2n.ir.dims.expr import (
    Dim,
    Extremum,
    FloorDiv,
    Monomial,
    Sym,
    SymbolicComparisonError,
    as_dim,
    atom_dim,
    single_atom,
)
from t2n.ir.dims.symbols import symbol_lower_bound


def provably_ge(a: Dim, b: Dim, depth: int = 0) -> bool:
    """``a >= b`` for every size: from bounds of ``a - b``, or argument by argument
    through minima and maxima (``min(1000, S) >= min(5, S)``)."""
    lo = lower_bound(as_dim(a) - as_dim(b))
    if lo is not None and lo >= 0:
        return True
    if depth > 4:
        return False
    ea, eb = single_atom(as_dim(a)), single_atom(as_dim(b))
    if isinstance(eb, Extremum) and eb.kind == "min" and any(provably_ge(a, x, depth + 1) for x in eb.args):
        return True
    if isinstance(ea, Extremum) and ea.kind == "max" and any(provably_ge(x, b, depth + 1) for x in ea.args):
        return True
    if isinstance(ea, Extremum) and ea.kind == "min" and all(provably_ge(x, b, depth + 1) for x in ea.args):
        return True
    return isinstance(eb, Extremum) and eb.kind == "max" and all(provably_ge(a, x, depth + 1) for x in eb.args)


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
    for mono, coef in d.terms:
        options = _mono_lower(mono, Fraction(coef))
        results = [_add_poly(r, o) for r in results for o in options][:_LIMIT]
        if not results:
            return []
    return results


def _upper_polys(d: Dim) -> list[_Poly]:
    neg = -d if isinstance(d, Sym) else -int(d)
    return [_scale(p, Fraction(-1)) for p in _lower_polys(neg)]


def _mono_lower(mono: Monomial, coef: Fraction) -> list[_Poly]:
    """Polynomials <= ``coef * mono``."""
    if not mono:
        return [{(): coef}]
    if all(isinstance(a, str) for a in mono):
        return [{tuple(sorted(a for a in mono if isinstance(a, str))): coef}]
    if len(mono) == 1:
        atom = mono[0]
        if isinstance(atom, FloorDiv):
            den = Fraction(atom.den)
            if coef > 0:  # floor(P / d) >= (P - (d - 1)) / d
                return [_scale(_add_poly(p, {(): -(den - 1)}), coef / den) for p in _lower_polys(atom.num)]
            return [_scale(p, coef / den) for p in _upper_polys(atom.num)]  # floor(P / d) <= P / d
        if isinstance(atom, Extremum):
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
            lo = Fraction(symbol_lower_bound(atom)) if isinstance(atom, str) else lower_bound(atom_dim(atom))
            if lo is None or lo < 0:
                return []
            prod *= lo
        return [{(): coef * prod}]
    return []
