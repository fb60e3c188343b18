"""f32-forcing passes: where the casts go (IR in → IR out), what they report, numerics in
tract against PyTorch (and against the f32 reference), and the bad inputs."""

import copy
import textwrap
import warnings

import numpy as np
import pytest
import torch
from torch import nn

import t2n
from t2n.errors import CheckMismatchError, InvalidArgumentError, PassError
from t2n.ir import DType, Graph, parse_graph, verify
from t2n.passes import PassManager, PassResult
from t2n.passes.precision import (
    ForceAttentionInnerInF32,
    ForceLinearAccumulationInF32,
    ForceNormInF32,
    precision_passes,
)

ALL = dict(force_attention_inner_in_f32=True, force_linear_accumulation_in_f32=True, force_norm_in_f32=True)


def ir(text: str) -> Graph:
    return parse_graph(textwrap.dedent(text).strip() + "\n")


def casts(g: Graph) -> list[tuple[str, str, str]]:
    """(source value, cast value, type) of every cast, in order."""
    return [(op.inputs[0].name, op.output.name, op.output.type.dtype.value) for op in g.ops() if op.kind == "cast"]


def assert_no_cast_pairs(g: Graph) -> None:
    """No f32 → f16 → f32 round trip anywhere (regions share their boundaries)."""
    for op in g.ops():
        if op.kind == "cast" and op.output.type.dtype is DType.F32:
            p = op.inputs[0].producer
            assert not (p is not None and p.kind == "cast" and p.inputs[0].type.dtype is DType.F32), \
                f"cast pair around %{op.inputs[0].name}"


def dtypes_of(g: Graph, *kinds: str) -> set[str]:
    return {op.output.type.dtype.value for op in g.ops() if op.kind in kinds}


# --- IR in → IR out ------------------------------------------------------------------------

ATTENTION = """
    graph main(%q: f16[1, 2, 4, 8], %k: f16[1, 2, 4, 8], %v: f16[1, 2, 4, 8], %m: f16[1, 1, 4, 4]) -> (%y) {
      %s: f16[] = const() {data=dense<f16[]>[0.35]}
      %qk: f16[1, 2, 4, 4] = matmul(%q, %k) {transpose_a=false, transpose_b=true}
      %scaled: f16[1, 2, 4, 4] = mul(%qk, %s)
      %masked: f16[1, 2, 4, 4] = add(%scaled, %m)
      %up: f32[1, 2, 4, 4] = cast(%masked) {to=f32}
      %p: f32[1, 2, 4, 4] = softmax(%up) {axes=[3]}
      %down: f16[1, 2, 4, 4] = cast(%p) {to=f16}
      %y: f16[1, 2, 4, 8] = matmul(%down, %v) {transpose_a=false, transpose_b=false}
    }"""


def test_attention_region_is_cast_at_its_boundary_only():
    g = ir(ATTENTION)
    res = PassManager([ForceAttentionInnerInF32()], verify_each=True)(g)
    assert res.modified
    assert res.stats["force-attention-inner-in-f32.regions"] == 1
    assert res.stats["force-attention-inner-in-f32.regions.attention"] == 1
    # q, k, mask and v up, the output down; the model's own casts around softmax are gone
    assert casts(g) == [("q", "q_f32", "f32"), ("k", "k_f32", "f32"), ("m", "m_f32", "f32"),
                        ("v", "v_f32", "f32"), ("y_f32", "y", "f16")]
    assert res.stats["force-attention-inner-in-f32.casts"] == 5
    assert dtypes_of(g, "matmul", "mul", "add", "softmax") == {"f32"}
    assert [v.name for v in g.outputs] == ["y"] and g.outputs[0].type.dtype is DType.F16


def test_adjacent_regions_share_a_boundary_instead_of_a_cast_pair():
    g = ir("""
        graph main(%x: f16[2, 8]) -> (%y) {
          %w: f16[8] = const() {data=dense<f16[8]>[1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0]}
          %b: f16[8] = const() {data=dense<f16[8]>[0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]}
          %xf: f32[2, 8] = cast(%x) {to=f32}
          %mean: f32[2, 1] = mean_reduce(%xf) {axes=[1], keepdims=true}
          %c: f32[2, 8] = sub(%xf, %mean)
          %sq: f32[2, 8] = mul(%c, %c)
          %var: f32[2, 1] = mean_reduce(%sq) {axes=[1], keepdims=true}
          %eps: f32[] = const() {data=dense<f32[]>[1e-05]}
          %ve: f32[2, 1] = add(%var, %eps)
          %r: f32[2, 1] = rsqrt(%ve)
          %n: f32[2, 8] = mul(%c, %r)
          %nh: f16[2, 8] = cast(%n) {to=f16}
          %a: f16[2, 8] = mul(%nh, %w)
          %ab: f16[2, 8] = add(%a, %b)
          %lw: f16[4, 8] = const() {data=dense<f16[4, 8]>}
          %y: f16[2, 4] = matmul(%ab, %lw) {transpose_a=false, transpose_b=true}
        }""")
    res = PassManager([ForceNormInF32(), ForceLinearAccumulationInF32()], verify_each=True)(g)
    assert res.stats["force-norm-in-f32.regions.layer_norm"] == 1
    assert res.stats["force-linear-accumulation-in-f32.regions.linear"] == 1
    assert res.stats["force-linear-accumulation-in-f32.shared_boundaries"] == 1
    assert_no_cast_pairs(g)
    # only the model's own cast up and one cast down at the very end remain
    assert casts(g) == [("x", "xf", "f32"), ("y_f32", "y", "f16")]


def test_regions_already_in_f32_are_left_alone():
    g = ir("""
        graph main(%x: f32[2, 8], %w: f32[4, 8]) -> (%y) {
          %m: f32[2, 4] = matmul(%x, %w) {transpose_a=false, transpose_b=true}
          %y: f32[2, 4] = softmax(%m) {axes=[1]}
        }""")
    before = str(g)
    for p in precision_passes().values():
        res = PassManager([p], verify_each=True)(g)
        assert not res.modified and res.stats[f"{p.name}.regions"] == 0
    assert str(g) == before


def test_softmax_without_matmuls_is_not_an_attention():
    g = ir("""
        graph main(%x: f16[2, 8]) -> (%y) {
          %y: f16[2, 8] = softmax(%x) {axes=[1]}
        }""")
    assert not PassManager([ForceAttentionInnerInF32()])(g).modified
    res = PassManager([ForceNormInF32()], verify_each=True)(g)
    assert res.stats["force-norm-in-f32.regions.softmax"] == 1
    assert casts(g) == [("x", "x_f32", "f32"), ("y_f32", "y", "f16")]


def test_pass_logs_what_it_changed(caplog):
    g = ir(ATTENTION)
    with caplog.at_level("INFO", logger="t2n"):
        ForceAttentionInnerInF32()(g)
    assert "force-attention-inner-in-f32: 1 region (attention ×1), 5 casts" in caplog.text


# --- numerics in tract ------------------------------------------------------------------------

def max_error(art, expected) -> float:
    try:
        return art.check("very_loose", inputs=art.example_inputs, expected=expected).max_abs
    except CheckMismatchError as exc:
        return exc.report.max_abs


def tract_vs_f32(model16, args16, **flags):
    """Export the f16 model; the artifact, its largest error in tract against PyTorch in f16
    (what ``check()`` compares) and against the f32 PyTorch reference of the same weights."""
    model32 = copy.deepcopy(model16).float()
    with torch.no_grad():
        out = model32(*[a.float() if a.is_floating_point() else a for a in args16])
    refs = [o.numpy() for o in (out if isinstance(out, tuple) else (out,)) if o is not None]
    art = t2n.compile(model16, args16, t2n.TractNNEF(**flags), verify_ir=True)
    return art, max_error(art, art.reference_outputs), max_error(art, refs)


class SDPA(nn.Module):
    def forward(self, q, k, v, m):
        return nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m)


def test_sdpa_in_f16_matches_pytorch_and_its_attention_runs_in_f32():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 16, 32, generator=g).mul(3).half() for _ in range(3))
    m = torch.zeros(1, 1, 16, 16).masked_fill(torch.rand(1, 1, 16, 16, generator=g) > 0.7, -1e4).half()
    art, on16, on32 = tract_vs_f32(SDPA(), (q, k, v, m), force_attention_inner_in_f32=True)
    assert art.stats["pass_stats"]["force-attention-inner-in-f32.regions.attention"] == 1
    assert dtypes_of(art.ir, "matmul", "softmax") == {"f32"}
    art.check()
    _, off16, off32 = tract_vs_f32(SDPA(), (q, k, v, m))
    assert on32 < off32 and on16 < off16


def test_multihead_attention_in_f16():
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(32, 4, batch_first=True).half().eval()
    x = torch.randn(1, 12, 32).half()
    art, _, on32 = tract_vs_f32(mha, (x, x, x), force_attention_inner_in_f32=True)
    assert art.stats["pass_stats"]["force-attention-inner-in-f32.regions.attention"] == 1
    softmax = next(op for op in art.ir.ops() if op.kind == "softmax")
    assert softmax.output.type.dtype is DType.F32
    # the averaged attention weights (a second output) leave the region through one cast
    assert [op.output.type.dtype for op in art.ir.ops() if op.kind == "cast"].count(DType.F16) == 2
    art.check()
    _, _, off32 = tract_vs_f32(mha, (x, x, x))
    assert on32 < off32


@pytest.mark.slow
def test_transformers_eager_attention_in_f16():
    import transformers as tf
    cfg = tf.BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=32)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = tf.BertModel(cfg).eval().half()
    ids = torch.randint(0, 50, (1, 9), generator=torch.Generator().manual_seed(0))
    art = t2n.compile(model, (ids,), t2n.TractNNEF(force_attention_inner_in_f32=True), verify_ir=True)
    assert art.stats["pass_stats"]["force-attention-inner-in-f32.regions.attention"] == 2
    assert dtypes_of(art.ir, "softmax") == {"f32"}
    assert_no_cast_pairs(art.ir)
    art.check()


def affine_norm(norm: nn.Module, scale: float = 4.0) -> nn.Module:
    """A norm whose weight and bias are large enough for their rounding to show."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in norm.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * scale)
    return norm


@pytest.mark.parametrize("label, norm, shape", [
    ("layer_norm", nn.LayerNorm(64), (4, 16, 64)),
    ("group_norm", nn.GroupNorm(4, 16), (2, 16, 8, 8)),
    ("rms_norm", nn.RMSNorm(64), (4, 16, 64)),
    ("batch_norm", nn.BatchNorm2d(16), (2, 16, 8, 8)),
])
def test_norms_in_f16_computed_in_f32(label, norm, shape):
    model = affine_norm(norm).half().eval()
    if isinstance(norm, nn.BatchNorm2d):
        norm.running_mean.normal_()
        norm.running_var.uniform_(0.5, 2.0)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(2)).half()
    art, on16, on32 = tract_vs_f32(model, (x,), force_norm_in_f32=True)
    stats = art.stats["pass_stats"]
    assert stats[f"force-norm-in-f32.regions.{label}"] == 1
    assert stats["force-norm-in-f32.regions"] == 1
    # every arithmetic op of the norm runs in f32; the artifact reads and returns f16
    arithmetic = [op for op in art.ir.ops() if op.kind in ("mul", "add", "sub", "rsqrt", "rms_norm", "mean_reduce")]
    assert arithmetic and {op.output.type.dtype for op in arithmetic} == {DType.F32}
    assert art.ir.outputs[0].type.dtype is DType.F16
    assert_no_cast_pairs(art.ir)
    _, off16, off32 = tract_vs_f32(model, (x,))
    assert on32 < off32
    if label != "batch_norm":  # its scale and shift are folded into f16 constants before the pass
        art.check()
        assert on16 == 0 < off16  # one rounding, as PyTorch: without the pass check() misses


@pytest.mark.parametrize("layer, shape", [
    (nn.Linear(512, 32), (8, 512)),
    (nn.Conv1d(64, 16, 9), (1, 64, 40)),
])
def test_linear_and_conv_accumulate_in_f32(layer, shape):
    model = layer.half().eval()
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(3)).abs().half()
    art, _, on32 = tract_vs_f32(model, (x,), force_linear_accumulation_in_f32=True)
    stats = art.stats["pass_stats"]
    assert stats["force-linear-accumulation-in-f32.regions"] == 1
    product = next(op for op in art.ir.ops() if op.kind in ("matmul", "conv"))
    assert product.output.type.dtype is DType.F32
    # input and weight up (the bias of a linear is in its region too), the output down
    cast_outs = [op.output.type.dtype for op in art.ir.ops() if op.kind == "cast"]
    assert cast_outs.count(DType.F16) == 1
    art.check()
    _, _, off32 = tract_vs_f32(model, (x,))
    assert on32 <= off32 if isinstance(layer, nn.Linear) else on32 < off32


def test_options_add_the_passes_and_a_spec_can_name_them():
    model = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.Softmax(-1)).half().eval()
    x = torch.randn(2, 8).half()
    by_option = t2n.compile(model, (x,), t2n.TractNNEF(**ALL))
    by_name = t2n.compile(model, (x,), passes="default,+force-linear-accumulation-in-f32,+force-norm-in-f32")
    assert str(by_option.ir) == str(by_name.ir)
    stats = by_option.stats["pass_stats"]
    assert stats["force-linear-accumulation-in-f32.regions"] == 1
    assert stats["force-norm-in-f32.regions"] == 2
    assert_no_cast_pairs(by_option.ir)
    by_option.check()


def test_f32_model_is_unchanged_by_the_options():
    model = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.Softmax(-1)).eval()
    x = torch.randn(2, 8)
    assert str(t2n.compile(model, (x,), t2n.TractNNEF(**ALL)).ir) == str(t2n.compile(model, (x,)).ir)


@pytest.mark.slow
def test_vit_in_f16_passes_with_f32_accumulation_and_misses_without():
    import transformers as tf
    cfg = tf.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                       image_size=16, patch_size=4, num_channels=3)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = tf.ViTModel(cfg).eval().half()
    x = torch.randn(1, 3, 16, 16).half()
    with pytest.raises(CheckMismatchError, match="last_hidden_state"):
        t2n.compile(model, (x,)).check()
    t2n.compile(model, (x,), t2n.TractNNEF(force_linear_accumulation_in_f32=True)).check()
    art = t2n.compile(model, (x,), t2n.TractNNEF(**ALL))
    assert art.stats["pass_stats"]["force-norm-in-f32.regions.layer_norm"] == 5
    art.check()


# --- bad input -----------------------------------------------------------------------------

@pytest.mark.parametrize("option", list(ALL))
@pytest.mark.parametrize("value", ["yes", 1, None, np.bool_(True)])
def test_option_must_be_a_bool(option, value):
    with pytest.raises(InvalidArgumentError, match=f"{option}=.*must be True or False"):
        t2n.TractNNEF(**{option: value})


class Recorder(nn.Module):
    """Says whether it was traced (a refused export must stop before tracing)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return torch.softmax(x, -1)


@pytest.mark.parametrize("how, named", [
    ("default,+force-norm-in-f32", "force-norm-in-f32"),
    ([ForceAttentionInnerInF32()], "force-attention-inner-in-f32"),
    ("force-linear-accumulation-in-f32,force-norm-in-f32", "force-linear-accumulation-in-f32, force-norm-in-f32"),
    ("default,+mine", "force-norm-in-f32"),
])
def test_khronos_refuses_f32_forcing_before_tracing(tmp_path, how, named):
    model = Recorder()
    with pytest.raises(InvalidArgumentError) as err:
        t2n.compile(model, (torch.randn(2, 4).half(),), t2n.KhronosNNEF(), passes=how,
                    pass_registry={"mine": ForceNormInF32()}, dump_ir=tmp_path / "ir")
    text = str(err.value)
    assert named in text and "KhronosNNEF" in text
    assert "no per-tensor numeric precision" in text and "TractNNEF" in text
    assert model.calls == 0
    assert not any(tmp_path.iterdir())


def test_khronos_target_has_no_forcing_options():
    with pytest.raises(TypeError, match="force_norm_in_f32"):
        t2n.KhronosNNEF(force_norm_in_f32=True)  # type: ignore[call-arg]


def test_passes_keep_the_graph_valid_and_honest():
    g = ir(ATTENTION)
    for p in (ForceNormInF32(), ForceLinearAccumulationInF32(), ForceAttentionInnerInF32()):
        before = g.edits
        res = p(g)
        assert res.modified == (g.edits != before)
        verify(g)


def test_option_and_spec_naming_the_same_pass_run_it_once():
    model = nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 8)).half().eval()
    x = torch.randn(2, 8).half()
    art = t2n.compile(model, (x,), t2n.TractNNEF(force_norm_in_f32=True),
                      passes="default,+force-norm-in-f32@after:bf16-as")
    assert art.stats["pass_stats"]["force-norm-in-f32.regions"] == 1
    art.check()


def test_precision_table_replaces_only_its_block(tmp_path):
    from benchmarks.precision_table import END, START, table, write

    doc = tmp_path / "precision.md"
    doc.write_text(f"intro\n{START}\nold\n{END}\nafter\n")
    write(table({"M": {c: (0.5, c != "off") for c in ("PyTorch f16", "off", "attention", "linear", "norm", "all")}}),
          doc)
    text = doc.read_text()
    assert text.startswith("intro\n") and text.endswith(f"{END}\nafter\n") and "old" not in text
    assert "| M | 0.5 | 0.5 ✗ | 0.5 |" in text
    doc.write_text("no markers")
    with pytest.raises(SystemExit, match="no .* block"):
        write("x", doc)
    assert doc.read_text() == "no markers"


def test_bf16_model_is_forced_after_it_becomes_f16():
    model = affine_norm(nn.LayerNorm(32)).bfloat16().eval()
    art = t2n.compile(model, (torch.randn(4, 32).bfloat16(),), t2n.TractNNEF(force_norm_in_f32=True))
    assert art.stats["pass_stats"]["force-norm-in-f32.regions.layer_norm"] == 1
    assert {v.type.dtype for v in art.ir.values()} <= {DType.F16, DType.F32, DType.I64}
    art.check("loose")


def test_postcondition_names_a_region_left_in_f16():
    class Lazy(ForceAttentionInnerInF32):
        def run(self, graph):
            return PassResult(graph, False, {})

    with pytest.raises(PassError, match=r"1 region\(s\) still compute in f16 after the pass: attention at %y"):
        Lazy()(ir(ATTENTION))
