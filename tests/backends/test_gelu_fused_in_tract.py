"""Exact GELU reaches tract in the order its optimiser fuses into one ``GeluExact``
kernel (what tract's ONNX path and the other NNEF exporter run), in f32 and f16, with
PyTorch's numerics."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

import t2n


def _optimised_ops(path, x: np.ndarray) -> list[str]:
    import tract

    runnable = tract.nnef().load(str(path)).into_runnable()
    nodes = json.loads(runnable.profile_json([x]))["nodes"]
    return [n["op_name"] for n in nodes if n["op_name"] not in ("Source", "Const")]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_exact_gelu_runs_as_one_fused_kernel_in_tract(tmp_path, dtype):
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(0)).to(dtype)
    artifact = t2n.export(nn.GELU(), (x,), tmp_path / "gelu.nnef.tar", target=t2n.TractNNEF.latest())
    ops = _optimised_ops(tmp_path / "gelu.nnef.tar", x.numpy())
    assert "GeluExact" in ops and "Erf" not in ops, ops
    assert artifact.check().ok


def test_tanh_gelu_keeps_tracts_own_approximate_op(tmp_path):
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(0))
    artifact = t2n.export(nn.GELU(approximate="tanh"), (x,), tmp_path / "gelu.nnef.tar",
                          target=t2n.TractNNEF.latest())
    assert "tract_core_gelu_approx" in artifact.rendered.graph_nnef
    assert artifact.check().ok
