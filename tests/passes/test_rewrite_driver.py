"""The one rewrite driver (``t2n.passes.rewrite``) and the one registry type
(``t2n.registry``) that every pattern pass and every table of t2n use."""

from __future__ import annotations

import pytest

from t2n.backends.nnef.context import EmitterSet, EmitterTable
from t2n.backends.tract.passes import DeboxUpsample, NearestAsDeconv, ReifySdpa
from t2n.frontend.registry import LoweringRegistry, RuleSet
from t2n.ir import Graph, Op, OpSet, OpTable, Value, parse_graph, print_graph
from t2n.passes.fold_batch_norm import FoldBatchNorm
from t2n.passes.reify_transformers import ReifyRmsNorm, ReifyRope
from t2n.passes.rewrite import Pattern, PatternPass, apply_patterns, only_reader, producer_of
from t2n.registry import DuplicateNameError, Registry, Table

NEGATIONS = """graph main(%x: f32[2, 3]) -> (%y) {
  %a: f32[2, 3] = neg(%x)
  %b: f32[2, 3] = neg(%a)
  %c: f32[2, 3] = neg(%b)
  %d: f32[2, 3] = neg(%c)
  %unread: f32[2, 3] = relu(%x)
  %y: f32[2, 3] = relu(%d)
}"""


def _double_negation(graph: Graph, op: Op) -> Value | None:
    inner = producer_of(op.inputs[0], "neg") if op.kind == "neg" else None
    return inner.inputs[0] if inner is not None and only_reader(graph, op.inputs[0], op) else None


DOUBLE_NEGATION = Pattern("double negations", _double_negation, lambda graph, op, x: x)


def test_the_driver_rewrites_every_match_and_drops_only_what_the_rewrites_left_unread():
    graph = parse_graph(NEGATIONS)
    counts = apply_patterns(graph, [DOUBLE_NEGATION])
    assert counts == {"double negations": 2}
    assert print_graph(graph) == (
        "graph main(%x: f32[2, 3]) -> (%y) {\n"
        "  %unread: f32[2, 3] = relu(%x)\n"
        "  %y: f32[2, 3] = relu(%x)\n"
        "}\n"
    )


def test_the_driver_visits_each_op_about_once_per_sweep():
    graph = parse_graph(NEGATIONS)
    seen: list[str] = []

    def counting(graph: Graph, op: Op) -> Value | None:
        seen.append(op.output.name)
        return _double_negation(graph, op)

    apply_patterns(graph, [Pattern("double negations", counting, lambda graph, op, x: x)])
    assert len(seen) <= 6 + 2  # one sweep over the 6 ops, one over what is left


def test_a_pattern_pass_reports_its_counts_and_whether_it_changed_anything():
    class NoDoubleNegation(PatternPass):
        name = "no-double-negation"

        def patterns(self):
            return [DOUBLE_NEGATION]

    graph = parse_graph(NEGATIONS)
    first = NoDoubleNegation()(graph)
    assert first.modified and first.stats == {"double negations": 2}
    again = NoDoubleNegation()(graph)
    assert not again.modified and again.stats == {}


@pytest.mark.parametrize("pass_type", [ReifySdpa, DeboxUpsample, NearestAsDeconv, ReifyRope, ReifyRmsNorm,
                                       FoldBatchNorm])
def test_every_pattern_pass_goes_through_the_driver(pass_type):
    assert issubclass(pass_type, PatternPass) and pass_type().patterns()


def test_the_three_kinds_of_tables_are_one_registry_type():
    for table, registry in ((OpTable, OpSet), (RuleSet, LoweringRegistry), (EmitterTable, EmitterSet)):
        assert issubclass(table, Table) and issubclass(registry, Registry)
    rules = RuleSet("mine")
    rules.add("aten::foo", lambda ctx: None)
    with pytest.raises(DuplicateNameError):
        rules.add("aten::foo", lambda ctx: None)
    base = LoweringRegistry.default()
    extended = base.extended(rules)
    assert "aten::foo" in extended and "aten::foo" not in base
