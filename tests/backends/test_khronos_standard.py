"""Khronos artifacts use standard operations only: erf (and exact GELU) is spelled out
in graph.nnef, so the Khronos parser and the nnef-tools interpreter take the artifact
with their default options, exactly as a user runs them."""

from __future__ import annotations

import importlib.util
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import t2n
from t2n.backends.nnef.emit import erf as erf_expansion
from t2n.check.engines import run_khronos
from t2n.errors import EngineError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_ir_op.py"
_spec = importlib.util.spec_from_file_location("t2n_example_custom_ir_op_khronos", EXAMPLE)
assert _spec is not None and _spec.loader is not None
ir_op = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = ir_op
_spec.loader.exec_module(ir_op)


class ErfAndGelu(torch.nn.Module):
    def forward(self, x):
        return torch.erf(x), torch.nn.functional.gelu(x)


def _exact_erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))


def _no_fragments(text: str) -> None:
    assert not re.search(r"^\s*fragment\b", text, flags=re.M), text[:400]
    assert "extension" not in text and "t2n_erf" not in text


def test_erf_in_the_khronos_interpreter_is_within_float32_precision(tmp_path):
    grid = np.linspace(-6.0, 6.0, 120001, dtype=np.float32)
    x = np.concatenate([grid, [0.0, -0.0, np.inf, -np.inf, 1e-30, 0.75, -0.75, 4.0]]).astype(np.float32)
    art = t2n.compile(ErfAndGelu().eval(), (torch.from_numpy(x)[None],), t2n.KhronosNNEF())
    _no_fragments(art.graph_nnef)
    art.save(tmp_path / "m")
    erf_out, gelu_out = run_khronos(str(tmp_path / "m"), [x[None]]).outputs
    err = np.abs(erf_out[0].astype(np.float64) - _exact_erf(x))
    assert err.max() <= 1.5e-7, (err.max(), x[err.argmax()])
    assert erf_out[0][-7] == 0.0 and erf_out[0][-6] == 1.0 and erf_out[0][-5] == -1.0
    finite = np.isfinite(x)
    xf = x[finite].astype(np.float64)
    gelu_ref = xf * (1 + _exact_erf(xf / math.sqrt(2.0))) / 2
    np.testing.assert_allclose(gelu_out[0][finite], gelu_ref, rtol=0, atol=2e-6)


def test_the_expansion_alone_is_accurate_in_float32():
    """The same formula in numpy float32, over the whole range: the coefficients, not
    the engine, set the error."""
    x = np.linspace(-5.0, 5.0, 400001, dtype=np.float32)
    xc = np.clip(x, -erf_expansion.CLAMP, erf_expansion.CLAMP).astype(np.float32)
    x2, ax = xc * xc, np.abs(xc)

    def horner(v: np.ndarray, coefficients: tuple[float, ...]) -> np.ndarray:
        acc = np.zeros_like(v)
        for c in reversed(coefficients):
            acc = acc * v + np.float32(c)
        return acc

    small = xc * horner(x2, erf_expansion.SMALL)
    s = (ax - np.float32(erf_expansion.LARGE_CENTRE)) * np.float32(1 / erf_expansion.LARGE_HALF_WIDTH)
    large = np.sign(xc) * (np.float32(1) - np.exp(-x2) * horner(s, erf_expansion.LARGE))
    got = np.where(ax < erf_expansion.SPLIT, small, large)
    assert np.abs(got - _exact_erf(x)).max() <= 1.3e-7


def test_gelu_model_runs_through_check_with_default_options():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    art = t2n.compile(model.eval(), (torch.randn(3, 8),), t2n.KhronosNNEF())
    _no_fragments(art.graph_nnef)
    assert art.check().ok


def test_the_interpreter_runs_without_options(tmp_path):
    """A fragment the consumer is not told to lower is refused by the stock tools: the
    check passes ``lowered`` only when asked, so the tests above prove the default run."""
    (tmp_path / "mish.nnef").write_text(ir_op.MISH_FRAGMENT)
    target = t2n.KhronosNNEF().with_emitters({"user_mish": ir_op.emit_mish},
                                             fragments={"user_mish": tmp_path / "mish.nnef"})
    x = torch.randn(4, 8)
    art = t2n.compile(ir_op.Gated().eval(), (x,), target, registry=ir_op.REGISTRY, op_set=ir_op.OP_SET)
    art.save(tmp_path / "m")
    with pytest.raises(EngineError) as info:
        run_khronos(str(tmp_path / "m"), [x.numpy()])
    assert "user_mish" in str(info.value)
    ran = run_khronos(str(tmp_path / "m"), [x.numpy()], lowered=["user_mish"])
    assert ran.outputs[0].shape == (4, 8)
