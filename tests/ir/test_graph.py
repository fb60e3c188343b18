import numpy as np
import pytest

from t2n.ir import (
    ArrayData,
    Builder,
    DType,
    Graph,
    GraphEditError,
    IRVerificationError,
    Sym,
    TensorType,
    parse_graph,
    print_graph,
    verify,
)

TEXT = """graph main(%x: f32[1, S, 4]) -> (%out) {
  %w: f32[4, 3] = variable() {data=dense<f32[4, 3]>, label="layer.weight"}
  %m: f32[1, S, 3] = matmul(%x, %w) {transpose_a=false, transpose_b=false}
  %s: i64[3] = shape_of(%x)
  %b: i64[1] = const() {data=dense<i64[1]>[0]}
  %e: i64[1] = const() {data=dense<i64[1]>[2]}
  %head: i64[2] = slice(%s, %b, %e) {axes=[0], steps=[1]}
  %neg: i64[1] = const() {data=dense<i64[1]>[-1]}
  %shape: i64[3] = concat(%head, %neg) {axis=0}
  %out: f32[1, S, 3] = reshape(%m, %shape)
}
"""


def test_print_parse_round_trip_is_stable():
    g = parse_graph(TEXT)
    verify(g)
    assert print_graph(g) == TEXT
    assert print_graph(parse_graph(print_graph(g))) == TEXT


def test_known_values_follow_symbols_and_reinference():
    g = parse_graph(TEXT)
    shape = next(op for op in g.ops() if op.kind == "concat").output
    assert shape.known.tolist() == [1, Sym("S"), -1]
    g.set_input_type(g.inputs[0], TensorType(DType.F32, [2, 7, 4]))
    assert g.reinfer() > 0
    assert g.outputs[0].type.shape == (2, 7, 3)
    verify(g)


def test_remove_refuses_while_used_and_rauw_moves_uses():
    g = Graph()
    b = Builder(g)
    x = g.add_input(TensorType(DType.F32, [2]), "x")
    a = b.op("exp", x)
    c = b.op("neg", a)
    g.set_outputs([c])
    with pytest.raises(GraphEditError):
        g.remove(a.producer)
    d = b.op("abs", x)
    assert g.replace_all_uses_with(a, d) == 1
    g.remove(a.producer)
    verify(g)
    assert [op.kind for op in g.ops()] == ["abs", "neg"]


def test_ordering_follows_data_not_creation():
    g = Graph()
    b = Builder(g)
    x = g.add_input(TensorType(DType.F32, [2]), "x")
    y = b.op("exp", x)
    out = b.op("neg", y)
    g.set_outputs([out])
    z = b.op("abs", x)  # created last, but feeds exp once rewired
    g.set_op_input(y.producer, 0, z)
    assert [op.kind for op in g.ops()] == ["abs", "exp", "neg"]
    verify(g)


def test_verify_reports_broken_use_lists_and_types():
    g = parse_graph(TEXT)
    m = next(op for op in g.ops() if op.kind == "matmul")
    m.inputs[0]._uses.clear()
    with pytest.raises(IRVerificationError, match="use-list misses"):
        verify(g)
    g = parse_graph(TEXT)
    m = next(op for op in g.ops() if op.kind == "matmul")
    m.output.type = TensorType(DType.F16, [1, Sym("S"), 3])
    with pytest.raises(IRVerificationError, match="stored type"):
        verify(g)


def test_parse_rejects_a_wrong_declared_type():
    bad = TEXT.replace("%m: f32[1, S, 3]", "%m: f32[1, S, 5]")
    with pytest.raises(ValueError, match="infers"):
        parse_graph(bad)


def test_ir_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, t2n.ir, t2n.passes; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_const_builder_dtypes():
    g = Graph()
    b = Builder(g)
    assert b.const(1.5).type.dtype is DType.F32
    assert b.const(np.arange(3)).type.dtype is DType.I64
    assert b.ints([Sym("S"), 2]).known.tolist() == [Sym("S"), 2]
    v = b.variable(ArrayData(np.zeros((2, 2), np.float16)), "w")
    assert str(v.type) == "f16[2, 2]"


def test_a_value_names_the_symbols_of_its_shape_and_known_sizes():
    """The symbols the renderer declares and the dynamic-axes check reads: those of the
    value's shape and those its known value (a computed size) holds."""
    g = parse_graph(TEXT.replace("f32[1, S, ", "f32[T, S, "))
    values = {v.name: v for v in g.values()}
    assert values["x"].symbols() == {"S", "T"}
    assert values["s"].symbols() == {"S", "T"}  # shape_of: a static shape, a known [T, S, 4]
    assert values["w"].symbols() == frozenset()
