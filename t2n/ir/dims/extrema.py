"""Minima and maxima of dimensions, folded with the bounds prover, and substitution.

``min(args)`` keeps only the arguments no other one provably beats, so that
``min(1000, S)`` stays an atom while ``min(S, S + 1)`` is ``S``. Substituting symbols
re-folds every minimum and maximum it rebuilds, which is why :func:`substitute` sits
here, above the prover, rather than on the expression class below it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from t2n.ir.dims.bounds import provably_ge
from t2n.ir.dims.expr import Dim, Extremum, FloorDiv, Sym, as_dim, atom_dim, single_atom


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
        inner = single_atom(a)
        if isinstance(inner, Extremum) and inner.kind == kind:
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
    return atom_dim(Extremum(kind, ordered))


def _better(kind: str, a: Dim, b: Dim) -> bool:
    """``a`` provably makes ``b`` useless in ``kind(a, b)`` (a <= b for min)."""
    return provably_ge(b, a) if kind == "min" else provably_ge(a, b)


def substitute(d: Dim, bindings: Mapping[str, Dim]) -> Dim:
    """``d`` with some symbols replaced by ints or other expressions (an int stays as
    it is); every minimum and maximum rebuilt is folded again."""
    if not isinstance(d, Sym):
        return d
    total: Dim = 0
    for mono, coef in d.terms:
        value: Dim = coef
        for atom in mono:
            if isinstance(atom, str):
                value = value * bindings.get(atom, Sym(atom))
            elif isinstance(atom, FloorDiv):
                value = value * (substitute(atom.num, bindings) // atom.den)
            else:
                args = [substitute(a, bindings) for a in atom.args]
                value = value * (sym_min(*args) if atom.kind == "min" else sym_max(*args))
        total = total + value
    return total
