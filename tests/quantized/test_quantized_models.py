"""Quantized PyTorch models run in tract against PyTorch's quantized output.

Outputs are compared in units of the output's quantization step: equal, or one step
off on a small fraction of elements (docs/quantization.md gives the measured figures).
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from qmodels import (  # noqa: F401 - the autouse fixtures
    MLP,
    EagerConvNet,
    FXConvNet,
    OneOp,
    eager_quantized,
    fbgemm_engine,
    fx_quantized,
    quiet_quantization_warnings,
    steps_in_tract,
    tq,
)
from torch import nn

import t2n
from t2n.ir import DType

MAX_FRACTION_ONE_STEP = 0.05


def _assert_within_one_step(max_steps: float, fraction: float) -> None:
    assert max_steps <= 1.0 + 1e-4, f"{max_steps} steps off"
    assert fraction <= MAX_FRACTION_ONE_STEP, f"{fraction:.1%} of elements one step off"


@pytest.mark.parametrize("kind", OneOp.KINDS)
def test_each_op_alone(tmp_path: Path, kind: str) -> None:
    torch.manual_seed(200)
    fuse = [["conv", "relu"]] if kind == "conv2d_relu" else []
    q = eager_quantized(OneOp(kind), fuse, torch.randn(16, 8, 8, 8))
    steps, fraction, _ = steps_in_tract(q, torch.randn(4, 8, 8, 8), q.out_scale(), tmp_path)
    assert steps <= 1.0 + 1e-4 and fraction <= 0.01, (steps, fraction)


def test_eager_convnet_per_channel_weights(tmp_path: Path) -> None:
    torch.manual_seed(0)
    q = eager_quantized(EagerConvNet(), [["conv", "relu"]], torch.randn(16, 3, 8, 8))
    steps, fraction, art = steps_in_tract(q, torch.randn(4, 3, 8, 8), q.fc.scale, tmp_path)
    _assert_within_one_step(steps, fraction)
    text = art.rendered.graph_nnef
    assert text.count("tract_core_qconv") == 3  # two convolutions and the linear
    assert art.rendered.graph_quant is None  # per-channel scales live on the ops


def test_eager_convnet_per_tensor_weights_write_graph_quant(tmp_path: Path) -> None:
    torch.manual_seed(1)
    q = eager_quantized(EagerConvNet(), [["conv", "relu"]], torch.randn(16, 3, 8, 8), tq.default_qconfig)
    steps, fraction, _ = steps_in_tract(q, torch.randn(4, 3, 8, 8), q.fc.scale, tmp_path)
    _assert_within_one_step(steps, fraction)
    quant = (tmp_path / "model" / "graph.quant").read_text()
    scale = float(np.float32(q.conv.weight().q_scale()))
    assert f'"conv_weight": zero_point_linear_quantize(zero_point = 0, scale = {scale!r}' in quant
    header = (tmp_path / "model" / "conv.weight.dat").read_bytes()[:128]
    bits, code = struct.unpack_from("<II", header, 44)
    assert (bits, code) in ((8, 3), (8, 4))  # signed 8-bit integers


@pytest.mark.parametrize("backend", ["fbgemm", "qnnpack"])
def test_fx_mlp(tmp_path: Path, backend: str) -> None:
    torch.backends.quantized.engine = backend
    torch.manual_seed(2)
    m = fx_quantized(MLP(), torch.randn(2, 16), torch.randn(64, 16), backend)
    steps, fraction, _ = steps_in_tract(m, torch.randn(16, 16), m.fc3.scale, tmp_path)
    _assert_within_one_step(steps, fraction)


def test_fx_convnet_conv1d_cat_hardswish(tmp_path: Path) -> None:
    torch.manual_seed(3)
    m = fx_quantized(FXConvNet(), torch.randn(2, 3, 8, 8), torch.randn(16, 3, 8, 8))
    steps, fraction, art = steps_in_tract(m, torch.randn(4, 3, 8, 8), m.fc.scale, tmp_path)
    _assert_within_one_step(steps, fraction)
    assert "stride = [1], dilation = [1], padding = [(1, 1)]" in art.rendered.graph_nnef  # the conv1d


class _QInt8Activations(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        q = torch.quantize_per_tensor(x, 0.05, -3, torch.qint8)
        return (torch.relu(q).dequantize(), torch.sigmoid(q).dequantize(), q.dequantize(),
                nn.functional.relu6(q).dequantize(), nn.functional.hardtanh(q, -1.0, 2.0).dequantize())


def test_qint8_activations_relu_sigmoid_clamps_exact() -> None:
    x = torch.linspace(-8, 8, 120).reshape(3, 40)
    t2n.compile(_QInt8Activations(), (x,)).check("exact")


class _Dynamic(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


@pytest.mark.parametrize("shape", [(8, 16), (3, 5, 16)])
def test_dynamic_quantized_linear(shape: tuple[int, ...]) -> None:
    torch.manual_seed(4)
    m = torch.ao.quantization.quantize_dynamic(_Dynamic().eval(), {nn.Linear}, dtype=torch.qint8)
    art = t2n.compile(m, (torch.randn(*shape),))
    report = art.check("approximate")
    assert report.ok
    weights = {t.label: t.dtype for t in art.rendered.tensors}
    assert weights["a.weight"] is DType.I8 and weights["b.weight"] is DType.I8  # not widened


def test_model_is_not_changed_by_export(tmp_path: Path) -> None:
    torch.manual_seed(5)
    q = eager_quantized(EagerConvNet(), [["conv", "relu"]], torch.randn(8, 3, 8, 8))
    x = torch.randn(2, 3, 8, 8)
    before = q(x)
    state = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in q.state_dict().items()}
    t2n.export(q, (x,), tmp_path / "m.tgz")
    assert torch.equal(q(x).int_repr() if q(x).is_quantized else q(x), before)
    for k, v in q.state_dict().items():
        if isinstance(v, torch.Tensor):
            assert torch.equal(v, state[k]) if not v.is_quantized else torch.equal(v.int_repr(), state[k].int_repr())


@pytest.mark.parametrize("how", ["trace", "script"])
def test_quantized_script_modules(tmp_path: Path, how: str) -> None:
    torch.manual_seed(6)
    q = eager_quantized(EagerConvNet(), [["conv", "relu"]], torch.randn(16, 3, 8, 8))
    x = torch.randn(4, 3, 8, 8)
    scripted = torch.jit.trace(q, x) if how == "trace" else torch.jit.script(q)
    steps, fraction, _ = steps_in_tract(scripted, x, q.fc.scale, tmp_path)
    _assert_within_one_step(steps, fraction)
