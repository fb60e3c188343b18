"""bf16 models: exported as f16 (tract's default) or f32, checked in the real engines.

Tolerances, and why:
* Against PyTorch computing in **f32 on the same bf16 values** (weights and inputs
  widened exactly): that is what the export computes. An f32 export must match at f32
  tolerance (atol 1e-5, rtol 1e-4). An f16 export rounds every intermediate result to
  f16 (unit roundoff 2^-11 ≈ 4.9e-4); over the ~6 ops of these models, with outputs of
  order 1, 1e-2 absolute + relative bounds it with a wide margin.
* Against **PyTorch's own bf16 outputs**: PyTorch rounds each op's output to bf16 (unit
  roundoff 2^-8 ≈ 3.9e-3) and the export does not, so the two differ by a few bf16
  roundings: we allow 4 × 2^-8 ≈ 0.0156 (absolute and relative), which a wrong
  conversion (bits reinterpreted, bytes swapped, values not converted) exceeds by
  orders of magnitude.
"""

import textwrap

import numpy as np
import pytest
import torch

import t2n
from t2n.check.engines import run_khronos, run_tract
from t2n.ir import DType, parse_graph, print_graph, verify
from t2n.ir.tensor_data import ConvertedData
from t2n.passes.bf16 import Bf16As

BF16_ULP = 2.0**-8


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.act = torch.nn.GELU()
        self.norm = torch.nn.LayerNorm(32)
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x):
        h = self.norm(self.act(self.fc1(x)))
        # an explicit round trip through f32 and back to the model's dtype (bf16 in the
        # model, f32 in the f32 reference), as mixed-precision code does
        return self.fc2(h).float().softmax(-1).to(self.fc2.weight.dtype) + self.fc2(h)


def _model_and_input():
    torch.manual_seed(0)
    model = Block().to(torch.bfloat16).eval()
    x = torch.randn(4, 16).to(torch.bfloat16)
    return model, x


def _f32_reference(model, x):
    """PyTorch in f32 on exactly the bf16 values: what the exported model computes."""
    import copy

    m32 = copy.deepcopy(model).float()
    with torch.no_grad():
        return m32(x.float()).numpy()


@pytest.mark.parametrize("bf16_as, f32_tol", [("f16", 1e-2), ("f32", None)])
def test_bf16_model_in_tract(tmp_path, bf16_as, f32_tol):
    model, x = _model_and_input()
    art = t2n.compile(model, (x,), t2n.TractNNEF(bf16_as=bf16_as), verify_ir=True)
    assert "bf16" not in art.graph_nnef
    assert all(v.type.dtype is not DType.BF16 for v in art.ir.values())
    art.save(tmp_path / "m.tar")
    want = np.float16 if bf16_as == "f16" else np.float32
    assert art.example_inputs[0].dtype == want
    got = run_tract(str(tmp_path / "m.tar"), art.example_inputs, registries=art.rendered.registries).outputs[0]
    assert got.dtype == want
    got = got.astype(np.float32)
    ref32 = _f32_reference(model, x)
    if f32_tol is None:
        np.testing.assert_allclose(got, ref32, atol=1e-5, rtol=1e-4)
    else:
        np.testing.assert_allclose(got, ref32, atol=f32_tol, rtol=f32_tol)
    # PyTorch's bf16 outputs, kept at export time (as f32 numbers)
    np.testing.assert_allclose(got, art.reference_outputs[0], atol=4 * BF16_ULP, rtol=4 * BF16_ULP)
    # and the check() API with an explicit tolerance agrees
    art.check("very_loose")


def test_bf16_model_in_khronos(tmp_path):
    model, x = _model_and_input()
    art = t2n.compile(model, (x,), t2n.KhronosNNEF(), verify_ir=True)  # bf16 as f32 by default
    art.save(tmp_path / "m")
    got = run_khronos(str(tmp_path / "m"), art.example_inputs).outputs[0]
    np.testing.assert_allclose(got, _f32_reference(model, x), atol=1e-5, rtol=1e-4)


def test_weights_are_converted_when_written_not_before():
    model, x = _model_and_input()
    art = t2n.compile(model, (x,), t2n.TractNNEF(bf16_as="f16"))
    tensors = {t.label: t for t in art.rendered.tensors}
    w = tensors["fc1.weight"]
    assert isinstance(w.data, ConvertedData) and w.dtype is DType.F16
    # the graph still references the model's bf16 memory
    src = w.data.source.raw()
    assert np.shares_memory(src, model.fc1.weight.view(torch.int16).numpy())


def ir(text):
    return textwrap.dedent(text).strip() + "\n"


def test_pass_retypes_inputs_casts_constants_and_activations():
    g = parse_graph(ir("""
        graph main(%x: bf16[2, 3]) -> (%y, %z) {
          %w: bf16[3] = variable() {data=dense<bf16[3]>, label="w"}
          %m: bf16[2, 3] = mul(%x, %w)
          %f: f32[2, 3] = cast(%m) {to=f32}
          %y: bf16[2, 3] = cast(%f) {to=bf16}
          %z: bf16[2, 3] = exp(%m)
        }"""))
    res = Bf16As(DType.F32)(g)
    verify(g)
    assert res.modified
    assert dict(res.stats) == {"inputs": 1, "ops_rewritten": 2, "values_retyped": 2}
    assert print_graph(g) == ir("""
        graph main(%x: f32[2, 3]) -> (%y, %z) {
          %w: f32[3] = variable() {data=dense<f32[3]>, label="w"}
          %m: f32[2, 3] = mul(%x, %w)
          %f: f32[2, 3] = cast(%m) {to=f32}
          %z: f32[2, 3] = exp(%m)
          %y: f32[2, 3] = cast(%f) {to=f32}
        }""")
    again = Bf16As(DType.F32)(g)
    assert not again.modified


def test_bf16_as_is_validated():
    with pytest.raises(ValueError, match="f16 or f32"):
        Bf16As("f64")
    with pytest.raises(ValueError, match="f16 or f32"):
        t2n.TractNNEF(bf16_as="i8")
