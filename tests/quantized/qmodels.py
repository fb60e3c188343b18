"""Quantized models for the tests in this folder, the step comparison they use, and
the autouse fixtures the test modules import (quiet deprecation warnings; fbgemm).

PyTorch's quantized engine: fbgemm (x86, this CI's CPU) for per-channel weights, and
qnnpack's default qconfig (per-tensor weights) where a case needs them; both run here.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import t2n
from t2n.backends.running import run_on_target

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import torch.ao.quantization as tq
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx


@pytest.fixture(autouse=True)
def quiet_quantization_warnings() -> Iterator[None]:
    """torch.ao.quantization warns about its own deprecation on every call."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        yield


@pytest.fixture(autouse=True)
def fbgemm_engine() -> Iterator[None]:
    before = torch.backends.quantized.engine
    torch.backends.quantized.engine = "fbgemm"
    yield
    torch.backends.quantized.engine = before


class EagerConvNet(nn.Module):
    """QuantStub, conv+relu, strided grouped conv, add_relu/mul/cat via
    FloatFunctional, hardswish, linear, DeQuantStub."""

    def __init__(self) -> None:
        super().__init__()
        self.quant = tq.QuantStub()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, groups=2)
        self.add = nn.quantized.FloatFunctional()
        self.mul = nn.quantized.FloatFunctional()
        self.cat = nn.quantized.FloatFunctional()
        self.act = nn.Hardswish()
        self.fc = nn.Linear(16 * 3 * 3, 10)
        self.dequant = tq.DeQuantStub()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.quant(x)
        y = self.relu(self.conv(x))
        z = self.conv2(y)
        z = self.add.add_relu(z, z)
        z = self.mul.mul(z, z)
        z = self.cat.cat([z, self.act(z)], 1)
        return self.dequant(self.fc(z.flatten(1)))


def eager_quantized(model: nn.Module, fuse: list[list[str]], calib: torch.Tensor,
                    qconfig: Any = None) -> nn.Module:
    model.eval()
    model.qconfig = qconfig or tq.get_default_qconfig("fbgemm")
    if fuse:
        tq.fuse_modules(model, fuse, inplace=True)
    prepared = tq.prepare(model)
    prepared(calib)
    return tq.convert(prepared)


def fx_quantized(model: nn.Module, example: torch.Tensor, calib: torch.Tensor,
                 backend: str = "fbgemm") -> nn.Module:
    mapping = tq.get_default_qconfig_mapping(backend)
    prepared = prepare_fx(model.eval(), mapping, (example,))
    prepared(calib)
    return convert_fx(prepared)


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 32)
        self.fc3 = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        h = torch.sigmoid(self.fc2(h)) + h
        return self.fc3(h)


class FXConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 6, 3)
        self.c2 = nn.Conv1d(6, 6, 3, padding=1)
        self.fc = nn.Linear(6 * 36, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.c1(x))                    # [N, 6, 6, 6]
        y = y.flatten(2)                              # [N, 6, 36]
        y = self.c2(y) + y
        y = torch.cat([y[:, :, :18], torch.nn.functional.hardswish(y[:, :, 18:])], 2)
        return self.fc(y.flatten(1))


class OneOp(nn.Module):
    """One quantized op between QuantStub and DeQuantStub; ``out_scale`` names the
    quantization step of its output."""

    KINDS = ("conv2d", "conv2d_relu", "conv1d", "linear", "add", "add_relu", "mul", "cat",
             "hardswish", "sigmoid")

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.quant, self.quant2, self.dequant = tq.QuantStub(), tq.QuantStub(), tq.DeQuantStub()
        self.conv = nn.Conv2d(8, 16, 3, padding=1)
        self.relu = nn.ReLU()
        self.conv1d = nn.Conv1d(8, 8, 3)
        self.fc = nn.Linear(64, 32)
        self.f = nn.quantized.FloatFunctional()
        self.hardswish = nn.Hardswish()
        self.sigmoid = nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, k = self.quant(x), self.kind
        b = self.quant2(x * 0.7 + 0.1)
        ops = {
            "conv2d": lambda: self.conv(a), "conv2d_relu": lambda: self.relu(self.conv(a)),
            "conv1d": lambda: self.conv1d(a.flatten(2)), "linear": lambda: self.fc(a.flatten(1)[:, :64]),
            "add": lambda: self.f.add(a, b), "add_relu": lambda: self.f.add_relu(a, b),
            "mul": lambda: self.f.mul(a, b), "cat": lambda: self.f.cat([a, b], 1),
            "hardswish": lambda: self.hardswish(a), "sigmoid": lambda: self.sigmoid(a),
        }
        return self.dequant(ops[k]())

    def out_scale(self) -> float:
        owner = {"conv2d": self.conv, "conv2d_relu": self.conv, "conv1d": self.conv1d, "linear": self.fc,
                 "hardswish": self.hardswish}.get(self.kind, self.f)
        return 1.0 / 256.0 if self.kind == "sigmoid" else float(owner.scale)


def steps_in_tract(model: nn.Module, x: torch.Tensor, out_scale: float,
                   tmp: Path, target: t2n.Target | None = None) -> tuple[float, float, t2n.Artifact]:
    """Export ``model``, run it in tract, and compare with PyTorch's quantized output in
    units of the output's quantization step: (max steps, fraction of elements off)."""
    art = t2n.compile(model, (x,), target) if target is not None else t2n.compile(model, (x,))
    path = tmp / "model"
    art.save(path)
    got = run_on_target(art.target, path, [x.numpy()], registries=art.rendered.registries)[0]
    with torch.no_grad():
        ref = model(x).numpy()
    steps = np.abs(got.astype(np.float64) - ref.astype(np.float64)) / float(out_scale)
    return float(steps.max()), float((steps > 0.01).mean()), art

