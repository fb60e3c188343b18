"""What ``torch.jit.trace`` leaves out is found, not written silently: the traced graph is
run once on the example inputs and compared with what ``forward`` returned.

A write through ``.data`` (or a NumPy view) into a tensor ``forward`` made changes PyTorch's
result but not the trace. Each such model gives an ``UntracedEffectWarning`` naming the
output and the ``.data`` line (``strict=True``: ``UntracedEffectError``, nothing written),
and the artifact really differs from PyTorch in tract (so the warning is not noise).
Models the trace records fully give none: the test suite turns the warning into an error
(pyproject's ``filterwarnings``), so every other test is a check against false alarms.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import torch
from torch import nn

import t2n
from t2n.errors import CheckMismatchError, UntracedEffectError
from t2n.frontend.trace import trace_module

HERE = Path(__file__).name


def line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


class TableThroughData(nn.Module):
    """A positional table filled through ``.data`` (diffusers' CogVideoX does this)."""

    def __init__(self) -> None:
        super().__init__()
        self.pos = nn.Parameter(torch.randn(1, 4, 6))

    def forward(self, x):
        table = x.new_zeros(1, 7, 6)
        table.data[:, 3:].copy_(self.pos)
        y = x + table
        # attention without dropout is deterministic: the replay still runs
        return nn.functional.scaled_dot_product_attention(y, y, y), x * 2


class TableThroughNumpy(nn.Module):
    def forward(self, x):
        table = torch.zeros(3, 5)
        table.numpy()[1] = 1.5
        return x - table


def test_a_write_through_data_is_named_and_the_artifact_really_differs():
    x = torch.randn(2, 7, 6)
    with pytest.warns(t2n.UntracedEffectWarning) as record:
        art = t2n.compile(TableThroughData(), (x,))
    assert len(record) == 1
    message = str(record[0].message)
    assert "output 0 differs" in message and "output 1" not in message
    assert f"{HERE}:{line_of(TableThroughData.forward, 'table.data[')}" in message
    assert "`.data` of a tensor computed in forward" in message and "frontend=\"export\"" in message
    with pytest.raises(CheckMismatchError):
        art.check()


def test_a_write_through_numpy_is_found_without_a_data_line():
    x = torch.randn(3, 5)
    with pytest.warns(t2n.UntracedEffectWarning, match="output 0 differs by up to 1.5 \\(5 of 15"):
        art = t2n.compile(TableThroughNumpy(), (x,))
    with pytest.raises(CheckMismatchError):
        art.check()


def test_strict_refuses_and_writes_nothing(tmp_path):
    out = tmp_path / "model.nnef.tgz"
    with pytest.raises(UntracedEffectError, match="Nothing was written"):
        t2n.export(TableThroughData(), (torch.randn(2, 7, 6),), out, strict=True)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_data_of_a_parameter_read_in_forward_is_not_a_finding():
    """``.data`` of a parameter (a graph input) is only read: no place, no warning."""

    class ReadsData(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(4))

        def forward(self, x):
            return x * self.w.data

    traced = trace_module(ReadsData(), (torch.randn(3, 4),), {})
    assert traced.detached == [] and traced.untraced == []
