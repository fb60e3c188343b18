"""Quantization schemes and ops t2n cannot export: a typed error naming each op, its
module and why, every one at once, and nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from qmodels import (  # noqa: F401 - the autouse fixtures
    EagerConvNet,
    eager_quantized,
    fbgemm_engine,
    quiet_quantization_warnings,
)
from torch import nn

import t2n
from t2n.errors import InvalidArgumentError, NotExpressibleError, T2NError, UnsupportedOpsError


def _export_fails(model: nn.Module, x: torch.Tensor, tmp_path: Path, error: type[T2NError],
                  target: t2n.Target | None = None) -> T2NError:
    dest = tmp_path / "out.tgz"
    with pytest.raises(error) as info:
        t2n.export(model, (x,), dest, target)
    assert not dest.exists()
    assert list(tmp_path.iterdir()) == []  # no temporary left behind either
    assert "nothing was written" in str(info.value)
    assert "What to do" in str(info.value)
    return info.value


class _PerChannelActivations(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = torch.quantize_per_channel(x, torch.tensor([0.1, 0.2]), torch.tensor([0, 0]), 1, torch.quint8)
        return q.dequantize()


def test_per_channel_activations(tmp_path: Path) -> None:
    err = _export_fails(_PerChannelActivations(), torch.randn(3, 2), tmp_path, UnsupportedOpsError)
    assert isinstance(err, UnsupportedOpsError)
    (p,) = err.problems
    assert p.op == "aten::quantize_per_channel"
    assert "per-channel quantized activations are not supported" in p.reason
    assert "test_quantized_errors.py" in p.source


class _QuantizeTo(nn.Module):
    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.quantize_per_tensor(x, 0.1, 0, self.dtype).dequantize()


@pytest.mark.parametrize("dtype, name", [(torch.quint4x2, "quint4x2"), (torch.qint32, "qint32")])
def test_activation_types_other_than_8_bit(tmp_path: Path, dtype: torch.dtype, name: str) -> None:
    err = _export_fails(_QuantizeTo(dtype), torch.randn(4, 4), tmp_path, UnsupportedOpsError)
    assert isinstance(err, UnsupportedOpsError)
    assert err.ops == ["aten::quantize_per_tensor"]
    assert f"quantization to {name} is not supported" in str(err)


class _TwoLinears(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.a(x), self.b(x)


def test_float16_dynamic_quantization_names_every_module(tmp_path: Path) -> None:
    m = torch.ao.quantization.quantize_dynamic(_TwoLinears().eval(), {nn.Linear}, dtype=torch.float16)
    err = _export_fails(m, torch.randn(2, 8), tmp_path, UnsupportedOpsError)
    assert isinstance(err, UnsupportedOpsError)
    assert sorted(p.module for p in err.problems) == ["a", "b"]
    assert all(p.op == "quantized::linear_dynamic_fp16" and "float16 dynamic quantization" in p.reason
               for p in err.problems)


class _UnsupportedQuantizedOps(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.ao.nn.quantized.ConvTranspose2d(4, 4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = torch.quantize_per_tensor(x, 0.1, 3, torch.quint8)
        y = torch.tanh(q).dequantize() + q.mean().dequantize()
        return y + self.up(q).dequantize().sum()


def test_every_unsupported_quantized_op_is_listed_at_once(tmp_path: Path) -> None:
    err = _export_fails(_UnsupportedQuantizedOps(), torch.randn(1, 4, 3, 3), tmp_path, UnsupportedOpsError)
    assert isinstance(err, UnsupportedOpsError)
    # an aten op PyTorch ran on a quantized tensor is reported under its quantized name
    assert err.ops == ["quantized::conv_transpose2d", "quantized::mean", "quantized::tanh"]
    assert ("quantized::conv_transpose2d", "up") in {(p.op, p.module) for p in err.problems}


def test_khronos_refuses_each_quantized_op(tmp_path: Path) -> None:
    torch.manual_seed(0)
    q = eager_quantized(EagerConvNet(), [["conv", "relu"]], torch.randn(8, 3, 8, 8))
    err = _export_fails(q, torch.randn(2, 3, 8, 8), tmp_path, NotExpressibleError, t2n.KhronosNNEF())
    assert isinstance(err, NotExpressibleError)
    by_op = {(p.op, p.module) for p in err.problems}
    assert ("quantized::conv2d_relu", "conv") in by_op
    assert ("quantized::linear", "fc") in by_op
    assert ("aten::quantize_per_tensor", "quant") in by_op
    assert "IR op 'qconv' has no Khronos NNEF form" in str(err)
    assert "on u8 tensors" not in str(err)  # an op with no form at all is reported once, as such


def test_weights_with_per_channel_zero_points_that_differ(tmp_path: Path) -> None:
    torch.manual_seed(1)
    qconfig = torch.ao.quantization.QConfig(
        activation=torch.ao.quantization.MinMaxObserver.with_args(dtype=torch.quint8),
        weight=torch.ao.quantization.PerChannelMinMaxObserver.with_args(
            dtype=torch.qint8, qscheme=torch.per_channel_affine),
    )
    q = eager_quantized(EagerConvNet(), [["conv", "relu"]], torch.randn(8, 3, 8, 8), qconfig)
    err = _export_fails(q, torch.randn(2, 3, 8, 8), tmp_path, UnsupportedOpsError)
    assert isinstance(err, UnsupportedOpsError)
    assert ("quantized::conv2d_relu", "conv") in {(p.op, p.module) for p in err.problems}
    assert "per-channel weight zero points that differ" in str(err)


def test_module_extractors_are_refused_on_quantized_models(tmp_path: Path) -> None:
    torch.manual_seed(2)
    q = eager_quantized(EagerConvNet(), [["conv", "relu"]], torch.randn(8, 3, 8, 8))
    extractor = t2n.ModuleExtractor(nn.Linear, lower=lambda ctx, module, x: x)
    dest = tmp_path / "out.tgz"
    with pytest.raises(InvalidArgumentError, match="module extractors are not supported on models quantized"):
        t2n.export(q, (torch.randn(2, 3, 8, 8),), dest, extractors=[extractor])
    assert list(tmp_path.iterdir()) == []
