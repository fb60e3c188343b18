"""Passes as IR text in, IR text out, with change counts."""

import textwrap

import attrs
import pytest

from t2n.errors import PassError
from t2n.ir import Graph, parse_graph, print_graph
from t2n.passes import ConstantFolding, DeadNodeElimination, Pass, PassManager, PassResult


def ir(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


def run(p, text):
    g = parse_graph(ir(text))
    res = PassManager([p], verify_each=True)(g)
    return res, print_graph(res.graph)


def test_dead_node_elimination():
    res, out = run(DeadNodeElimination(), """
        graph main(%x: f32[2]) -> (%y) {
          %unused: f32[2] = exp(%x)
          %also: f32[2] = neg(%unused)
          %y: f32[2] = relu(%x)
        }""")
    assert res.stats == {"dead-node-elimination.removed": 2, "sweeps": 1}
    assert out == ir("""
        graph main(%x: f32[2]) -> (%y) {
          %y: f32[2] = relu(%x)
        }""")


def test_constant_folding_keeps_output_names():
    res, out = run(ConstantFolding(), """
        graph main(%x: f32[2]) -> (%y, %k) {
          %c: f32[2] = const() {data=dense<f32[2]>[1.0, 4.0]}
          %k: f32[2] = sqrt(%c)
          %y: f32[2] = mul(%x, %k)
        }""")
    assert res.stats["constant-folding.folded"] == 1
    assert "%k: f32[2] = const() {data=dense<f32[2]>[1.0, 2.0]}" in out
    assert "(%y, %k)" in out


def test_folding_symbolic_shape_arithmetic():
    g = parse_graph(ir("""
        graph main(%x: f32[S, 4]) -> (%y) {
          %s: i64[2] = shape_of(%x)
          %neg: i64[1] = const() {data=dense<i64[1]>[-1]}
          %b: i64[1] = const() {data=dense<i64[1]>[0]}
          %e: i64[1] = const() {data=dense<i64[1]>[1]}
          %head: i64[1] = slice(%s, %b, %e) {axes=[0], steps=[1]}
          %shape: i64[2] = concat(%head, %neg) {axis=0}
          %y: f32[S, 4] = reshape(%x, %shape)
        }"""))
    res = PassManager([DeadNodeElimination(), ConstantFolding()], fixed_point=True, verify_each=True)(g)
    assert res.modified
    assert print_graph(g) == ir("""
        graph main(%x: f32[S, 4]) -> (%y) {
          %shape: i64[2] = const() {data=dense<i64[2]>[sym"S", -1]}
          %y: f32[S, 4] = reshape(%x, %shape)
        }""")


def test_folding_skips_big_results():
    res, _ = run(ConstantFolding(max_bytes=8), """
        graph main(%x: f32[4]) -> (%y) {
          %c: f32[4] = const() {data=dense<f32[4]>[1.0, 4.0, 9.0, 16.0]}
          %k: f32[4] = sqrt(%c)
          %y: f32[4] = mul(%x, %k)
        }""")
    assert not res.modified


@attrs.frozen
class AlwaysChanges(Pass):
    """Really edits the graph every time (routes the output through one more relu)."""

    name = "always-changes"

    def run(self, graph: Graph) -> PassResult:
        out = graph.outputs[0]
        graph.set_outputs([graph.create_op("relu", [out]).output])
        return PassResult(graph, True, {})


@attrs.frozen
class ReturnsNothing(Pass):
    name = "returns-nothing"

    def run(self, graph):  # type: ignore[override]
        return None


@attrs.frozen
class BreaksUseLists(Pass):
    name = "breaks-use-lists"

    def run(self, graph: Graph) -> PassResult:
        op = graph.ops()[0]
        op.inputs[0]._uses.clear()  # behind the graph's back: no edit is counted
        return PassResult(graph, False, {})


SIMPLE = """
    graph main(%x: f32[2]) -> (%y) {
      %y: f32[2] = relu(%x)
    }"""


def test_manager_stops_at_a_bound_and_names_the_pass():
    with pytest.raises(PassError, match="always-changes"):
        PassManager([AlwaysChanges()], fixed_point=True, max_sweeps=3)(parse_graph(ir(SIMPLE)))


def test_manager_enforces_the_contract():
    with pytest.raises(PassError, match="not a PassResult"):
        PassManager([ReturnsNothing()])(parse_graph(ir(SIMPLE)))


def test_manager_verifies_after_each_pass_and_lists_previous_ones():
    with pytest.raises(PassError) as info:
        PassManager([DeadNodeElimination(), BreaksUseLists()], verify_each=True)(parse_graph(ir(SIMPLE)))
    assert info.value.pass_name == "breaks-use-lists"
    assert "dead-node-elimination" in info.value.previous


def test_manager_dumps_changed_graphs():
    dumps = []
    g = parse_graph(ir("""
        graph main(%x: f32[2]) -> (%y) {
          %unused: f32[2] = exp(%x)
          %y: f32[2] = relu(%x)
        }"""))
    PassManager([DeadNodeElimination()], dump=lambda label, gr: dumps.append(label))(g)
    assert dumps == ["001-dead-node-elimination"]
