"""Every op kind declares the attributes it takes, and the verifier holds each op to
its schema: an unknown name, a missing required attribute or a value of another kind
is an IRVerificationError naming the op, its output and the attribute."""

import numpy as np
import pytest

from t2n.backends.nnef.reader.evaluate import common_read_ops
from t2n.backends.nnef.reader.statements import read_op_set
from t2n.backends.tract.ops import with_tract_forms
from t2n.backends.tract.reader import tract_read_ops
from t2n.ir import (
    Builder,
    DType,
    Graph,
    IRVerificationError,
    OpSchema,
    OpSet,
    OpTable,
    TensorType,
    parse_graph,
    verify,
)
from t2n.ir.attributes import (
    FLOAT,
    INT,
    INTS,
    NONE,
    PAIRS,
    SIZE,
    Attr,
    attr_problems,
    optional,
    required,
)
from t2n.ir.dims import Sym


def _graph(line: str, out: str = "f32[2, 3]") -> Graph:
    return parse_graph(f"graph main(%x: f32[2, 3]) -> (%y) {{\n  %y: {out} = {line}\n}}\n")


def test_a_value_of_the_wrong_kind_is_refused_by_name():
    g = _graph("matmul(%x, %x) {transpose_b=1}", "f32[2, 2]")
    with pytest.raises(IRVerificationError) as info:
        verify(g)
    (problem,) = info.value.problems
    assert problem == "matmul -> %y: attribute 'transpose_b' is int 1, not bool"


def test_an_unknown_attribute_is_refused_by_name():
    g = _graph("exp(%x) {alpha=1.0}")
    with pytest.raises(IRVerificationError, match=r"exp -> %y: unknown attribute 'alpha' \(it takes none\)"):
        verify(g)


def test_a_missing_required_attribute_is_refused_by_name():
    g = _graph("gelu(%x)")
    with pytest.raises(IRVerificationError, match=r"gelu -> %y: missing required attribute 'approximate' \(str\)"):
        verify(g)


def test_every_problem_of_an_op_is_listed():
    g = Graph()
    b = Builder(g)
    x = g.add_input(TensorType(DType.F32, [2, 3]), "x")
    g.set_outputs([b.op("leaky_relu", x, name="act", slope=0.1)])
    with pytest.raises(IRVerificationError) as info:
        verify(g)
    assert info.value.problems == [
        "leaky_relu -> %act: unknown attribute 'slope' (it takes alpha)",
        "leaky_relu -> %act: missing required attribute 'alpha' (float)",
    ]


def test_optional_attributes_may_be_left_out_and_sequences_be_lists_or_tuples():
    verify(_graph("is_inf(%x)", "bool[2, 3]"))
    verify(_graph("matmul(%x, %x) {transpose_b=true}", "f32[2, 2]"))
    g = Graph()
    b = Builder(g)
    x = g.add_input(TensorType(DType.F32, [2, 3]), "x")
    g.set_outputs([b.op("pad", b.op("transpose", x, perm=[1, 0]), pads=[(0, 1), [np.int64(1), 0]],
                        mode="constant", value=0)])
    verify(g)


def test_kinds():
    assert INT.accepts(np.int64(3)) and not INT.accepts(True) and not INT.accepts(3.0)
    assert FLOAT.accepts(1) and FLOAT.accepts(np.float32(0.5)) and not FLOAT.accepts(False)
    assert INTS.accepts([1, 2]) and INTS.accepts(()) and not INTS.accepts(1) and not INTS.accepts((1, "2"))
    assert PAIRS.accepts(((0, 1), [2, 3])) and not PAIRS.accepts(((0, 1, 2),))
    assert SIZE.accepts(Sym("S")) and SIZE.accepts(4) and not SIZE.accepts("S")
    assert (FLOAT | NONE).accepts(None) and (FLOAT | NONE).name == "float | none"
    declared: dict[str, Attr] = {"k": required(INT), "alpha": optional(FLOAT | NONE, None)}
    assert attr_problems(declared, {"k": 2, "alpha": None}) == []
    assert attr_problems(declared, {"alpha": "x"}) == [
        "missing required attribute 'k' (int)", "attribute 'alpha' is str 'x', not float | none"]


def _op_sets() -> dict[str, OpSet]:
    """The op sets a graph may be built with: the built-in one, with the tract target's
    own forms, and those of graphs read back from NNEF (standard and tract)."""
    return {
        "default": OpSet.default(),
        "tract forms": with_tract_forms(OpSet.default()),
        "read standard NNEF": read_op_set(common_read_ops()),
        "read tract NNEF": read_op_set(tract_read_ops()),
    }


@pytest.mark.parametrize("name", list(_op_sets()))
def test_every_registered_schema_declares_its_attributes(name):
    op_set = _op_sets()[name]
    assert len(op_set) > 100
    undeclared = [kind for kind, schema in op_set.items() if schema.attrs is None]
    assert undeclared == []
    for kind, schema in op_set.items():
        assert all(isinstance(a, Attr) for a in schema.attrs.values()), kind


def test_a_users_schema_that_declares_nothing_is_not_checked_but_one_that_declares_is():
    table = OpTable("mine")
    table.op("free")(lambda ctx: [ctx.types[0]])
    table.add(OpSchema("strict", lambda ctx: [ctx.types[0]], attrs={"alpha": required(FLOAT)}))
    g = Graph(opset=OpSet.default().extended(table))
    b = Builder(g)
    x = g.add_input(TensorType(DType.F32, [2]), "x")
    g.set_outputs([b.op("strict", b.op("free", x, anything="goes"), name="s", alpha="high")])
    with pytest.raises(IRVerificationError) as info:
        verify(g)
    assert info.value.problems == ["strict -> %s: attribute 'alpha' is str 'high', not float"]
