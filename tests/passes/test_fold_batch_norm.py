"""FoldBatchNorm: IR text in → IR text out with change counts, then numerics in the engines."""

import textwrap

import numpy as np
import pytest
import torch
from torch import nn

from t2n.ir import parse_graph, print_graph
from t2n.passes import DeadNodeElimination, PassManager
from t2n.passes.fold_batch_norm import FoldBatchNorm
from t2n.testing import check_export


def ir(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


def run(text: str):
    g = parse_graph(ir(text))
    res = PassManager([FoldBatchNorm(), DeadNodeElimination()], verify_each=True)(g)
    return res, g


CONV = "{dilation=[1, 1], groups=1, padding=[[0, 0], [0, 0]], stride=[1, 1]}"


def test_conv_scale_and_shift_fold_into_weight_and_bias():
    res, g = run(f"""
        graph main(%x: f32[1, 1, 3, 3]) -> (%y) {{
          %w: f32[2, 1, 1, 1] = const() {{data=dense<f32[2, 1, 1, 1]>[1.0, 2.0]}}
          %b: f32[2] = const() {{data=dense<f32[2]>[0.5, -1.0]}}
          %c: f32[1, 2, 3, 3] = conv(%x, %w, %b) {CONV}
          %s: f32[2, 1, 1] = const() {{data=dense<f32[2, 1, 1]>[2.0, 4.0]}}
          %m: f32[1, 2, 3, 3] = mul(%c, %s)
          %t: f32[2, 1, 1] = const() {{data=dense<f32[2, 1, 1]>[1.0, 3.0]}}
          %y: f32[1, 2, 3, 3] = add(%t, %m)
        }}""")
    assert res.stats["fold-batch-norm.folded"] == 2
    assert print_graph(g) == ir(f"""
        graph main(%x: f32[1, 1, 3, 3]) -> (%y) {{
          %w_1: f32[2, 1, 1, 1] = const() {{data=dense<f32[2, 1, 1, 1]>[2.0, 8.0]}}
          %b_1_1: f32[2] = const() {{data=dense<f32[2]>[2.0, -1.0]}}
          %y: f32[1, 2, 3, 3] = conv(%x, %w_1, %b_1_1) {CONV}
        }}""")


def test_linear_with_bias_then_batch_norm():
    res, g = run("""
        graph main(%x: f32[4, 3]) -> (%y) {
          %w: f32[2, 3] = const() {data=dense<f32[2, 3]>[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]}
          %h: f32[4, 2] = matmul(%x, %w) {transpose_a=false, transpose_b=true}
          %b: f32[2] = const() {data=dense<f32[2]>[1.0, -1.0]}
          %l: f32[4, 2] = add(%h, %b)
          %s: f32[2] = const() {data=dense<f32[2]>[0.5, 2.0]}
          %m: f32[4, 2] = mul(%l, %s)
          %t: f32[2] = const() {data=dense<f32[2]>[0.25, 1.0]}
          %y: f32[4, 2] = add(%m, %t)
        }""")
    assert res.stats["fold-batch-norm.folded"] == 2
    assert print_graph(g) == ir("""
        graph main(%x: f32[4, 3]) -> (%y) {
          %w_1: f32[2, 3] = const() {data=dense<f32[2, 3]>[0.5, 1.0, 1.5, 8.0, 10.0, 12.0]}
          %h: f32[4, 2] = matmul(%x, %w_1) {transpose_a=false, transpose_b=true}
          %b_1_1: f32[2] = const() {data=dense<f32[2]>[0.75, -1.0]}
          %y: f32[4, 2] = add(%h, %b_1_1)
        }""")


def test_matmul_without_bias_keeps_its_add():
    """x @ W then * s then + t: the scale folds into W; the shift stays as the bias add."""
    res, g = run("""
        graph main(%x: f32[4, 2]) -> (%y) {
          %w: f32[2, 2] = const() {data=dense<f32[2, 2]>[1.0, 2.0, 3.0, 4.0]}
          %h: f32[4, 2] = matmul(%x, %w) {transpose_a=false, transpose_b=false}
          %s: f32[2] = const() {data=dense<f32[2]>[2.0, 3.0]}
          %m: f32[4, 2] = mul(%h, %s)
          %t: f32[2] = const() {data=dense<f32[2]>[1.0, 1.0]}
          %y: f32[4, 2] = add(%m, %t)
        }""")
    assert res.stats["fold-batch-norm.folded"] == 1
    assert print_graph(g) == ir("""
        graph main(%x: f32[4, 2]) -> (%y) {
          %t: f32[2] = const() {data=dense<f32[2]>[1.0, 1.0]}
          %w_1: f32[2, 2] = const() {data=dense<f32[2, 2]>[2.0, 6.0, 6.0, 12.0]}
          %m: f32[4, 2] = matmul(%x, %w_1) {transpose_a=false, transpose_b=false}
          %y: f32[4, 2] = add(%m, %t)
        }""")


UNSAFE = {
    "conv output read twice": f"""
        graph main(%x: f32[1, 1, 3, 3]) -> (%y, %c) {{
          %w: f32[2, 1, 1, 1] = const() {{data=dense<f32[2, 1, 1, 1]>[1.0, 2.0]}}
          %c: f32[1, 2, 3, 3] = conv(%x, %w) {CONV}
          %s: f32[2, 1, 1] = const() {{data=dense<f32[2, 1, 1]>[2.0, 4.0]}}
          %y: f32[1, 2, 3, 3] = mul(%c, %s)
        }}""",
    "scale along a spatial axis": f"""
        graph main(%x: f32[1, 1, 3, 3]) -> (%y) {{
          %w: f32[2, 1, 1, 1] = const() {{data=dense<f32[2, 1, 1, 1]>[1.0, 2.0]}}
          %c: f32[1, 2, 3, 3] = conv(%x, %w) {CONV}
          %s: f32[3, 1] = const() {{data=dense<f32[3, 1]>[2.0, 4.0, 8.0]}}
          %y: f32[1, 2, 3, 3] = mul(%c, %s)
        }}""",
    "weight computed at run time": f"""
        graph main(%x: f32[1, 1, 3, 3], %w: f32[2, 1, 1, 1]) -> (%y) {{
          %c: f32[1, 2, 3, 3] = conv(%x, %w) {CONV}
          %s: f32[2, 1, 1] = const() {{data=dense<f32[2, 1, 1]>[2.0, 4.0]}}
          %y: f32[1, 2, 3, 3] = mul(%c, %s)
        }}""",
    "scale that broadcasts the output bigger": f"""
        graph main(%x: f32[1, 1, 3, 3]) -> (%y) {{
          %w: f32[2, 1, 1, 1] = const() {{data=dense<f32[2, 1, 1, 1]>[1.0, 2.0]}}
          %c: f32[1, 2, 3, 3] = conv(%x, %w) {CONV}
          %s: f32[2, 2, 1, 1] = const() {{data=dense<f32[2, 2, 1, 1]>[2.0, 4.0, 1.0, 1.0]}}
          %y: f32[2, 2, 3, 3] = mul(%c, %s)
        }}""",
    "linear scaled along its batch axis": """
        graph main(%x: f32[2, 3]) -> (%y) {
          %w: f32[2, 3] = const() {data=dense<f32[2, 3]>[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]}
          %h: f32[2, 2] = matmul(%x, %w) {transpose_a=false, transpose_b=true}
          %s: f32[2, 1] = const() {data=dense<f32[2, 1]>[0.5, 2.0]}
          %y: f32[2, 2] = mul(%h, %s)
        }""",
}


@pytest.mark.parametrize("case", sorted(UNSAFE))
def test_leaves_unsafe_forms_alone(case):
    before = ir(UNSAFE[case])
    res, g = run(before)
    assert not res.modified
    assert print_graph(g) == before


def test_weights_it_does_not_change_are_not_copied():
    """A shift folds into the bias only: the conv keeps the very same weight data, and a
    weight shared with another conv is never rewritten in place."""
    g = parse_graph(ir(f"""
        graph main(%x: f32[1, 1, 3, 3]) -> (%y, %z) {{
          %w: f32[2, 1, 1, 1] = variable() {{data=dense<f32[2, 1, 1, 1]>, label="conv.weight"}}
          %c: f32[1, 2, 3, 3] = conv(%x, %w) {CONV}
          %t: f32[2, 1, 1] = const() {{data=dense<f32[2, 1, 1]>[1.0, 3.0]}}
          %y: f32[1, 2, 3, 3] = add(%c, %t)
          %d: f32[1, 2, 3, 3] = conv(%x, %w) {CONV}
          %s: f32[2, 1, 1] = const() {{data=dense<f32[2, 1, 1]>[2.0, 4.0]}}
          %z: f32[1, 2, 3, 3] = mul(%d, %s)
        }}"""))
    w_op = g.ops()[0]
    w_data = w_op.attrs["data"]
    res = PassManager([FoldBatchNorm(), DeadNodeElimination()], verify_each=True)(g)
    assert res.stats["fold-batch-norm.folded"] == 2
    convs = [op for op in g.ops() if op.kind == "conv"]
    shifted = next(c for c in convs if c.output.name == "y")
    scaled = next(c for c in convs if c.output.name == "z")
    assert shifted.inputs[1].producer is w_op and w_op.attrs["data"] is w_data
    new_w = scaled.inputs[1].producer
    assert new_w is not w_op and new_w.kind == "variable" and new_w.attrs["label"] == "conv.weight"
    np.testing.assert_array_equal(shifted.inputs[2].producer.attrs["data"].values(), [1.0, 3.0])


def test_grouped_deconv_scales_each_output_channel():
    g = parse_graph(ir("""
        graph main(%x: f32[1, 4, 2, 2]) -> (%y) {
          %w: f32[4, 2, 1, 1] = const() {data=dense<f32[4, 2, 1, 1]>[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]}
          %c: f32[1, 4, 2, 2] = deconv(%x, %w) {dilation=[1, 1], groups=2, output_padding=[0, 0], padding=[[0, 0], [0, 0]], stride=[1, 1]}
          %s: f32[4, 1, 1] = const() {data=dense<f32[4, 1, 1]>[1.0, 2.0, 3.0, 4.0]}
          %y: f32[1, 4, 2, 2] = mul(%c, %s)
        }"""))
    PassManager([FoldBatchNorm(), DeadNodeElimination()], verify_each=True)(g)
    (deconv,) = [op for op in g.ops() if op.kind == "deconv"]
    w = deconv.inputs[1].producer.attrs["data"].values()
    # input channels 0,1 feed output channels 0,1 (group 0); 2,3 feed 2,3 (group 1)
    np.testing.assert_array_equal(w.reshape(4, 2), [[1, 2], [1, 2], [3, 4], [3, 4]])


def _bn(m):
    m.running_mean.uniform_(-1, 1)
    m.running_var.uniform_(0.5, 2)
    if m.affine:
        m.weight.data.uniform_(0.5, 2)
        m.bias.data.uniform_(-1, 1)
    return m


MODELS = {
    "conv2d": lambda: (nn.Sequential(nn.Conv2d(3, 4, 3), _bn(nn.BatchNorm2d(4)), nn.ReLU()), (3, 6, 6)),
    "conv1d_nobias": lambda: (nn.Sequential(nn.Conv1d(3, 4, 3, bias=False), _bn(nn.BatchNorm1d(4))), (3, 7)),
    "linear": lambda: (nn.Sequential(nn.Linear(5, 4), _bn(nn.BatchNorm1d(4))), (5,)),
    "linear_nobias_noaffine": lambda: (nn.Sequential(nn.Linear(5, 4, bias=False),
                                                     _bn(nn.BatchNorm1d(4, affine=False))), (5,)),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_folded_models_match_pytorch(name):
    model, shape = MODELS[name]()
    res = check_export(model, (torch.randn(2, *shape),))
    art = res.artifacts["tract"]
    assert art.stats["pass_stats"]["fold-batch-norm.folded"] >= 1
    assert "mul" not in [op.kind for op in art.ir.ops()]


def test_grouped_deconv_folded_matches_pytorch():
    model = nn.Sequential(nn.ConvTranspose2d(4, 6, 3, groups=2), _bn(nn.BatchNorm2d(6)))
    res = check_export(model, (torch.randn(2, 4, 5, 5),))
    for target in ("tract", "khronos"):
        assert [op.kind for op in res.artifacts[target].ir.ops() if op.kind == "mul"] == []


def test_option_turns_folding_off():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), _bn(nn.BatchNorm2d(4)))
    res = check_export(model, (torch.randn(1, 3, 5, 5),), targets=["tract"], fold_batch_norm=False)
    art = res.artifacts["tract"]
    assert "fold-batch-norm.folded" not in art.stats["pass_stats"]
    assert [op.kind for op in art.ir.ops() if op.kind in ("conv", "mul", "add")] == ["conv", "mul", "add"]


LINEAR_THEN_SCALE = """
    graph main(%x: f32[4, 3]) -> (%y) {
      %w: f32[2, 3] = const() {data=dense<f32[2, 3]>[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]}
      %h: f32[4, 2] = matmul(%x, %w) {transpose_a=false, transpose_b=true}
      %s: f32[2] = const() {data=dense<f32[2]>[0.5, 2.0]}
      %y: f32[4, 2] = mul(%h, %s)
    }"""


@pytest.mark.parametrize("lazy", [False, True])
def test_weights_read_lazily_from_disk_are_not_folded(lazy):
    """Folding would load a lazily mapped weight whole and keep a scaled copy alive."""
    from t2n.ir import DType
    from t2n.ir.tensor_data import LazyData

    g = parse_graph(ir(LINEAR_THEN_SCALE))
    loads = []
    if lazy:
        (mm,) = [op for op in g.ops() if op.kind == "matmul"]

        def load() -> np.ndarray:
            loads.append(1)
            return np.arange(6, dtype=np.float32).reshape(2, 3)

        mm.inputs[1].producer.attrs["data"] = LazyData(DType.F32, (2, 3), load=load)
    res = PassManager([FoldBatchNorm(), DeadNodeElimination()], verify_each=True)(g)
    assert res.stats.get("fold-batch-norm.folded", 0) == (0 if lazy else 1)
    assert [op.kind for op in g.ops()].count("mul") == (1 if lazy else 0)
    assert loads == []
