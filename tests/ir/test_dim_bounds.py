"""Minima, maxima and the bounds that settle comparisons of sizes (``t2n.ir.dims``).

Every claim the prover makes must hold at every size: ``lower_bound`` is below the
value, and ``decide`` agrees with evaluation whenever it answers. Checked on random
expressions of floor divisions, minima and maxima over two symbols (sizes >= 1).
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from t2n.ir import Sym, parse_dim
from t2n.ir.dims import (
    SymbolicComparisonError,
    decide,
    lower_bound,
    provably_ge,
    sym_max,
    sym_min,
    upper_bound,
)

S, P = Sym("S"), Sym("P")

exprs = st.recursive(
    st.one_of(st.integers(-6, 9), st.sampled_from([S, P])),
    lambda kids: st.one_of(
        st.tuples(kids, kids).map(lambda t: t[0] + t[1]),
        st.tuples(kids, kids).map(lambda t: t[0] - t[1]),
        st.tuples(kids, st.integers(-3, 3)).map(lambda t: t[0] * t[1]),
        st.tuples(kids, st.integers(1, 4)).map(lambda t: t[0] // t[1]),
        st.tuples(kids, kids).map(lambda t: sym_min(t[0], t[1])),
        st.tuples(kids, kids).map(lambda t: sym_max(t[0], t[1])),
    ),
    max_leaves=6,
)
SIZES = [(1, 1), (1, 7), (2, 3), (5, 1), (12, 40), (1000, 2)]


def _value(e, s, p):
    return e.evaluate({"S": s, "P": p}) if isinstance(e, Sym) else e


@settings(max_examples=150, deadline=None)
@given(exprs)
def test_lower_and_upper_bounds_hold_at_every_size(e):
    lo, hi = lower_bound(e), upper_bound(e)
    for s, p in SIZES:
        v = _value(e, s, p)
        assert lo is None or lo <= v
        assert hi is None or v <= hi


@settings(max_examples=150, deadline=None)
@given(exprs, exprs, st.sampled_from(["lt", "le", "gt", "ge", "eq", "ne"]))
def test_decide_agrees_with_evaluation_whenever_it_answers(a, b, op):
    try:
        verdict = decide(op, a, b)
    except SymbolicComparisonError:
        return
    for s, p in SIZES:
        x, y = _value(a, s, p), _value(b, s, p)
        truth = {"lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y, "eq": x == y, "ne": x != y}[op]
        assert verdict == truth, (a, op, b, s, p)


@given(exprs)
def test_min_and_max_survive_the_text_round_trip(e):
    parsed = parse_dim(str(e))
    for s, p in SIZES:
        assert _value(parsed, s, p) == _value(e, s, p)


def test_sizes_settle_what_pytorch_clamps():
    assert sym_min(S, 1000) != S and str(sym_min(S, 1000)) == "min(1000, S)"
    assert sym_min(S, 1) == 1 and sym_max(S - 1, 0) == S - 1  # a size is at least 1
    assert sym_min(S // 2, S) == S // 2 and decide("le", S // 2, S)
    assert provably_ge(sym_min(1000, S), sym_min(5, S))
    assert not decide("lt", S, 0) and decide("ge", S % 4, 0) and decide("lt", S % 4, 4)
    with pytest.raises(SymbolicComparisonError):
        decide("le", S, 8)


def test_the_bound_of_correlated_terms_cancels():
    assert lower_bound(S - S // 2) == 1
    assert lower_bound(S - sym_min(S, 8)) == 0
    assert lower_bound((3 * S) // 4 - S // 4) == 0
