"""The one rewrite driver (``t2n.passes.rewrite``) and the one registry type
(``t2n.registry``) that every pattern pass and every table of t2n use."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys

import pytest

import t2n
from t2n.backends.nnef.context import EmitterSet, EmitterTable
from t2n.frontend.registry import LoweringRegistry, RuleSet
from t2n.ir import Graph, Op, OpSet, OpTable, Value, parse_graph, print_graph
from t2n.passes.base import Pass
from t2n.passes.precision.base import ForceF32Pass
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


REWIRING = re.compile(r"\.replace_all_uses_with\(")
"""Moving a value's readers to another value: what a rewrite does."""

DRIVERS = {"t2n.ir.graph": "the primitive itself", "t2n.passes.rewrite": "the pattern driver",
           "t2n.passes.precision.regions": "the f32-region driver of the ForceF32Pass passes"}
"""The only modules that may rewire values."""


def _t2n_modules() -> list[str]:
    names = [info.name for info in pkgutil.walk_packages(t2n.__path__, "t2n.")]
    for name in names:
        importlib.import_module(name)
    return names


def _pass_classes() -> list[type[Pass]]:
    _t2n_modules()
    found, todo = [], [Pass]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub.__module__.startswith("t2n."):
                found.append(sub)
            todo.append(sub)
    return found


def test_no_module_of_t2n_rewires_values_outside_the_drivers():
    """Every rewrite of t2n (core, targets, LLM, NeMo) runs on a driver: a pass that
    loops over the ops and rewires them itself is found here, whatever its name."""
    loops = [name for name in _t2n_modules()
             if name not in DRIVERS and REWIRING.search(inspect.getsource(sys.modules[name]))]
    assert loops == []


def test_every_rewriting_pass_found_by_walking_is_a_driver_pass():
    passes = _pass_classes()
    pattern_passes = [cls for cls in passes if issubclass(cls, PatternPass) and cls is not PatternPass]
    assert len(pattern_passes) >= 15  # the walk reaches the targets', LLM and core passes
    assert {"StatefulKVCache", "WindowKvAttention", "SliceRowsEarly", "DropEmptyRowGuards",
            "ConstantFolding"} <= {cls.__name__ for cls in pattern_passes}
    for cls in pattern_passes:
        assert cls.patterns is not PatternPass.patterns, f"{cls.__name__} defines no patterns()"
    for cls in passes:
        module = sys.modules[cls.__module__]
        if cls.__module__ not in DRIVERS and not issubclass(cls, (PatternPass, ForceF32Pass)):
            assert not REWIRING.search(inspect.getsource(module)), cls.__name__


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
