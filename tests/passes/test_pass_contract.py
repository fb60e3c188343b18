"""The pass contract held by ``Pass.__call__``: requires/ensures, an honest ``modified``
checked against the graph's edit counter, and a PassManager defined at its edges."""

import textwrap

import attrs
import numpy as np
import pytest

from t2n.errors import DynamicAxesError, InvalidArgumentError, PassError
from t2n.ir import DType, Graph, Shape, TensorType, parse_graph, print_graph
from t2n.passes import ConstantFolding, DeadNodeElimination, Pass, PassManager, PassResult
from t2n.passes.bf16 import Bf16As
from t2n.passes.dynamic_axes import DynamicAxes
from t2n.passes.fold_batch_norm import FoldBatchNorm


def ir(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


SIMPLE = ir("""
    graph main(%x: f32[2]) -> (%y) {
      %unused: f32[2] = exp(%x)
      %y: f32[2] = relu(%x)
    }""")


# -- the edit counter -------------------------------------------------------------

def test_every_structural_edit_is_counted_and_no_op_edits_are_not():
    g = Graph()
    steps = []

    def step(label, fn):
        before = g.edits
        fn()
        steps.append((label, g.edits - before))

    t = TensorType(DType.F32, Shape([2]))
    holder = {}
    step("add_input", lambda: holder.setdefault("x", g.add_input(t, "x")))
    x = holder["x"]
    step("create_op", lambda: holder.setdefault("r", g.create_op("relu", [x])))
    step("set_outputs", lambda: g.set_outputs([holder["r"].output]))
    step("set_outputs same", lambda: g.set_outputs([holder["r"].output]))
    step("set_input_type same", lambda: g.set_input_type(x, t))
    step("rename same", lambda: g.rename(holder["r"].output, holder["r"].output.name))
    step("rename", lambda: g.rename(holder["r"].output, "y"))
    step("unique_name", lambda: g.unique_name("free"))
    step("create neg", lambda: holder.setdefault("n", g.create_op("neg", [x])))
    step("set_op_input same", lambda: g.set_op_input(holder["r"], 0, x))
    step("replace_all_uses_with", lambda: g.replace_all_uses_with(holder["r"].output, holder["n"].output))
    step("remove", lambda: g.remove(holder["r"]))
    step("reinfer nothing new", lambda: g.reinfer())
    assert steps == [
        ("add_input", 1), ("create_op", 1), ("set_outputs", 1), ("set_outputs same", 0),
        ("set_input_type same", 0), ("rename same", 0), ("rename", 1), ("unique_name", 0),
        ("create neg", 1), ("set_op_input same", 0), ("replace_all_uses_with", 1), ("remove", 1),
        ("reinfer nothing new", 0),
    ]


def test_graph_info_is_not_an_edit():
    g = parse_graph(SIMPLE)
    before = g.edits
    g.info.symbols["S"] = 3
    g.info.custom_extensions.append("tract_assert S >= 1")
    assert g.edits == before


# -- modified must match the edits -------------------------------------------------

@attrs.frozen
class SilentEditor(Pass):
    name = "silent-editor"

    def run(self, graph: Graph) -> PassResult:
        graph.remove(next(op for op in graph.ops() if op.kind == "exp"))
        return PassResult(graph, False, {})


@attrs.frozen
class Boaster(Pass):
    name = "boaster"

    def run(self, graph: Graph) -> PassResult:
        return PassResult(graph, True, {"did": 1})


def test_a_pass_that_edits_but_says_unmodified_is_refused_by_name():
    g = parse_graph(SIMPLE)
    with pytest.raises(PassError) as info:
        PassManager([ConstantFolding(), SilentEditor()])(g)
    err = info.value
    assert err.pass_name == "silent-editor"
    assert "reported modified=False but made 1 edit(s)" in str(err)
    assert "report modified=True" in str(err)
    assert err.previous == ("constant-folding",)


def test_a_pass_that_says_modified_without_an_edit_is_refused_by_name():
    g = parse_graph(SIMPLE)
    with pytest.raises(PassError) as info:
        Boaster()(g)
    assert info.value.pass_name == "boaster"
    assert "reported modified=True but made no edit" in str(info.value)
    assert print_graph(g) == SIMPLE  # the graph the pass was given is untouched


@attrs.frozen
class ReturnsACopy(Pass):
    name = "returns-a-copy"
    modified: bool = True

    def run(self, graph: Graph) -> PassResult:
        return PassResult(parse_graph(print_graph(graph)), self.modified)


def test_a_pass_returning_another_graph_has_modified_it():
    g = parse_graph(SIMPLE)
    assert ReturnsACopy()(g).graph is not g
    with pytest.raises(PassError, match="returns-a-copy reported modified=False"):
        ReturnsACopy(modified=False)(g)


# -- requires / ensures ------------------------------------------------------------

@attrs.frozen
class NeedsStaticShapes(Pass):
    name = "needs-static-shapes"

    def requires(self, graph: Graph) -> None:
        dynamic = [v.name for v in graph.inputs if not v.type.shape.is_static]
        assert not dynamic, f"inputs {dynamic} have symbolic sizes; run me before dynamic-axes"

    def ensures(self, graph: Graph) -> None:
        if any(op.kind == "exp" for op in graph.ops()):
            raise ValueError("an exp is left")

    def run(self, graph: Graph) -> PassResult:
        return DeadNodeElimination().run(graph)


def test_requires_refuses_with_the_pass_name_before_anything_runs():
    g = parse_graph(ir("""
        graph main(%x: f32[S]) -> (%y) {
          %unused: f32[S] = exp(%x)
          %y: f32[S] = relu(%x)
        }"""))
    before = print_graph(g)
    with pytest.raises(PassError) as info:
        NeedsStaticShapes()(g)
    assert info.value.pass_name == "needs-static-shapes"
    assert "precondition failed" in str(info.value) and "run me before dynamic-axes" in str(info.value)
    assert isinstance(info.value.__cause__, AssertionError)
    assert print_graph(g) == before


def test_ensures_runs_on_the_result():
    assert NeedsStaticShapes()(parse_graph(SIMPLE)).modified

    @attrs.frozen
    class KeepsExp(NeedsStaticShapes):
        name = "keeps-exp"

        def run(self, graph: Graph) -> PassResult:
            return PassResult(graph, False)

    with pytest.raises(PassError, match="keeps-exp: postcondition failed: ValueError: an exp is left"):
        KeepsExp()(parse_graph(SIMPLE))


# -- the manager's edges -------------------------------------------------------------

@pytest.mark.parametrize("bad", [0, -1, True, 2.0])
def test_max_sweeps_below_one_is_refused_when_the_manager_is_made(bad):
    with pytest.raises(InvalidArgumentError, match=f"max_sweeps must be an int of at least 1.*got {bad!r}"):
        PassManager([DeadNodeElimination()], fixed_point=True, max_sweeps=bad)


@pytest.mark.parametrize("bad, where", [
    ([DeadNodeElimination, ConstantFolding()], "passes\\[0\\]"),
    (DeadNodeElimination(), "list of Pass objects"),
    ("dead-node-elimination", "list of Pass objects"),
])
def test_manager_refuses_what_is_not_a_list_of_passes(bad, where):
    with pytest.raises(InvalidArgumentError, match=where):
        PassManager(bad)


@pytest.mark.parametrize("fixed_point", [False, True])
def test_empty_pipeline_runs_nothing(fixed_point):
    g = parse_graph(SIMPLE)
    before = g.edits
    res = PassManager([], fixed_point=fixed_point)(g)
    assert (res.graph, res.modified, dict(res.stats)) == (g, False, {"sweeps": 0})
    assert g.edits == before and print_graph(g) == SIMPLE


def test_one_sweep_accepts_only_a_graph_already_at_its_fixed_point():
    done = ir("""
        graph main(%x: f32[2]) -> (%y) {
          %y: f32[2] = relu(%x)
        }""")
    res = PassManager([DeadNodeElimination()], fixed_point=True, max_sweeps=1)(parse_graph(done))
    assert not res.modified and res.stats["sweeps"] == 1
    with pytest.raises(PassError, match="no fixed point after 1 sweeps; still changing: dead-node-elimination"):
        PassManager([DeadNodeElimination()], fixed_point=True, max_sweeps=1)(parse_graph(SIMPLE))


def test_fixed_point_counts_sweeps():
    res = PassManager([DeadNodeElimination()], fixed_point=True, max_sweeps=2)(parse_graph(SIMPLE))
    assert res.modified and res.stats == {"dead-node-elimination.removed": 1, "sweeps": 2}


# -- built-in passes are honest and idempotent ----------------------------------------

DYNAMIC = ir("""
    graph main(%x: f32[2, 3]) -> (%y) {
      %s: i64[2] = shape_of(%x)
      %y: f32[2, 3] = reshape(%x, %s)
    }""")


def test_dynamic_axes_twice_changes_nothing_the_second_time():
    g = parse_graph(DYNAMIC)
    p = DynamicAxes({"x": {1: "S"}})
    first = p(g)
    assert first.modified and first.stats["symbols"] == 1 and first.stats["retyped"] > 0
    text, edits = print_graph(g), g.edits
    assert g.info.symbols == {"S": 3}
    second = p(g)
    assert not second.modified
    assert second.stats == {"symbols": 0, "retyped": 0, "baked": 0}
    assert (print_graph(g), g.edits) == (text, edits)
    assert "x: f32[2, S]" in text


def test_dynamic_axes_on_an_axis_that_already_is_another_symbol_is_refused():
    g = parse_graph(DYNAMIC)
    DynamicAxes({"x": {1: "S"}})(g)
    before = print_graph(g)
    with pytest.raises(DynamicAxesError, match=r"dynamic_axes\['x'\]\[1\] = 'T'.*already is the symbolic size S"):
        DynamicAxes({"x": {1: "T"}})(g)
    assert print_graph(g) == before


def test_dynamic_axes_on_a_graph_with_symbols_of_unknown_size():
    """Symbols with no traced size (IR written by hand) are left unchecked, not a KeyError."""
    g = parse_graph(ir("""
        graph main(%x: f32[2, T]) -> (%y) {
          %s: i64[2] = shape_of(%x)
          %y: f32[2, T] = reshape(%x, %s)
        }"""))
    res = DynamicAxes({"x": {0: "B"}})(g)
    assert res.modified and g.info.symbols == {"B": 2} and res.stats["baked"] == 0


@pytest.mark.parametrize("make", [DeadNodeElimination, ConstantFolding, FoldBatchNorm, Bf16As])
def test_builtin_passes_report_no_change_on_their_own_output(make):
    g = parse_graph(ir("""
        graph main(%x: bf16[2]) -> (%y) {
          %unused: bf16[2] = exp(%x)
          %c: f32[2] = const() {data=dense<f32[2]>[1.0, 4.0]}
          %k: f32[2] = sqrt(%c)
          %xf: f32[2] = cast(%x) {to=f32}
          %y: f32[2] = mul(%xf, %k)
        }"""))
    PassManager([make()], fixed_point=True)(g)
    edits = g.edits
    res = make()(g)
    assert not res.modified and g.edits == edits


def test_constant_folding_counts_match_edits():
    g = parse_graph(ir("""
        graph main(%x: f32[2]) -> (%y) {
          %c: f32[2] = const() {data=dense<f32[2]>[1.0, 4.0]}
          %k: f32[2] = sqrt(%c)
          %y: f32[2] = mul(%x, %k)
        }"""))
    res = ConstantFolding()(g)
    assert res.stats == {"folded": 1}
    k = next(op for op in g.ops() if op.outputs[0].name == "k")
    assert np.array_equal(k.attrs["data"].values(), [1.0, 2.0])
