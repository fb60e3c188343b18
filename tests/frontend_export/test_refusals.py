"""What the torch.export frontend refuses: one typed error naming the construct and the
user's source line, suggesting frontend="jit", with torch's exception as the cause and
nothing written."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import t2n
from t2n.errors import (
    ExportFrontendError,
    InvalidArgumentError,
    ScriptedModelExportError,
    TraceError,
)

USE_JIT = 'frontend="jit"'


class Cond(nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda v: v + 1, lambda v: v - 1, (x,))  # line: cond


class Holder(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = Cond()

    def forward(self, x):
        return self.gate(x) * 2


class BranchOnData(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # line: branch
            return x + 1
        return x - 1


class Item(nn.Module):
    def forward(self, x):
        return torch.zeros(int(x.sum().item()))  # line: item


class LoopOnData(nn.Module):
    def forward(self, x):
        for _ in range(int(x[0])):  # line: loop
            x = x + 1
        return x


class Unique(nn.Module):
    """(``nonzero`` and boolean masks export: tests/ops/test_data_sized_selection.py.)"""

    def forward(self, x):
        return torch.unique(x).float() * 2  # line: unique


class NumpyCall(nn.Module):
    def forward(self, x):
        return torch.from_numpy(x.numpy() * 2)  # line: numpy


def _line(tag):
    """``file:line`` of the line marked ``# line: tag`` in this file."""
    with open(__file__) as f:
        for number, text in enumerate(f, 1):
            if text.rstrip().endswith(f"# line: {tag}"):
                return f"{__file__}:{number}"
    raise AssertionError(tag)


@pytest.mark.parametrize("model, tag, construct, cause", [
    (Holder(), "cond", "torch.ops.higher_order.cond", None),
    (BranchOnData(), "branch", "data-dependent Python", "GuardOnDataDependentSymNode"),
    (Item(), "item", "data-dependent Python", "GuardOnDataDependentSymNode"),
    (LoopOnData(), "loop", "data-dependent Python", "GuardOnDataDependentSymNode"),
    (Unique(), "unique", "aten::_unique2", None),
    (NumpyCall(), "numpy", "could not run with symbolic tensors", "RuntimeError"),
], ids=["cond", "branch", "item", "loop", "unique", "numpy"])
def test_refused_construct_is_named_with_its_source_line(tmp_path, model, tag, construct, cause):
    x = torch.ones(3)
    dest = tmp_path / "m.nnef.tgz"
    with pytest.raises(ExportFrontendError) as info:
        t2n.export(model, (x,), dest, frontend="export")
    err = info.value
    assert isinstance(err, TraceError)
    text = str(err)
    assert construct in text and USE_JIT in text
    assert _line(tag) in text and err.source.startswith(_line(tag))
    if cause:
        assert type(err.__cause__).__name__ == cause
    assert not dest.exists() and list(tmp_path.iterdir()) == []
    assert torch.equal(x, torch.ones(3))  # the input is left as it was


def test_cond_names_the_module_holding_it():
    with pytest.raises(ExportFrontendError, match="in module 'gate'"):
        t2n.compile(Holder(), (torch.ones(3),), frontend="export")


def test_the_refused_models_export_with_the_jit_frontend():
    """The suggestion holds: the jit frontend records the branch the example takes."""
    with pytest.warns(t2n.SpecializedTraceWarning):
        art = t2n.compile(BranchOnData(), (torch.ones(3),))
    assert art.check().ok


def test_scripted_module_is_refused_before_anything_runs():
    scripted = torch.jit.script(nn.Linear(3, 2))
    with pytest.raises(ScriptedModelExportError) as info:
        t2n.compile(scripted, (torch.ones(1, 3),), frontend="export")
    assert isinstance(info.value, ExportFrontendError) and isinstance(info.value, InvalidArgumentError)
    assert "RecursiveScriptModule" in str(info.value) and USE_JIT in str(info.value)
    assert info.value.construct == "scripted module"


class CheckedLengths(nn.Module):
    """XLM's form: a value read from the data only to check it (``.item()`` in a check
    that torch.export keeps as a run-time assertion)."""

    def forward(self, x, mask):
        lengths = mask.sum(dim=1)
        torch._check(lengths.max().item() <= x.shape[1])
        return x * 2 + lengths[:, None]


class ScaledByItem(nn.Module):
    def forward(self, x):
        n = (x > 0).sum().item()
        torch._check(n <= 3)
        return x * n


def test_a_value_read_only_by_a_check_is_dropped_as_the_jit_trace_drops_it():
    x, mask = torch.randn(2, 5), torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)
    art = t2n.compile(CheckedLengths(), (x, mask), frontend="export")
    assert art.check().ok
    assert not {"aten::_local_scalar_dense", "aten::item"} & set(art.ir.info.aten_ops)


def test_a_value_read_by_a_check_and_by_the_computation_is_still_refused():
    with pytest.raises(ExportFrontendError, match="data-dependent value or size"):
        t2n.compile(ScaledByItem(), (torch.randn(3),), frontend="export")
