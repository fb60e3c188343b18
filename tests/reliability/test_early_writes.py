"""``t2n.export`` never keeps a weight it wrote early that the compiled graph does not use.

The early writer writes the model's parameters before the trace runs the forward; a
forward that changes a parameter where its version counter does not see it must still
get the changed value into the artifact, as ``compile().save()`` and ``.tgz`` do.

Cases tried (9): a forward halving a weight through ``.data`` on its first call, into a
``.tar`` and a folder, through ``t2n.export`` and the drop-in ``export_model_to_nnef``
(a ``.tar`` by default); a forward writing one element through ``.data`` (which the
sampled fingerprint would miss); a forward writing through a numpy view (which the
trace does not see); the same model with ``frontend="export"``; a weight changed
through ``.data`` by another thread while the model compiles; and, as a control, a
model whose forward writes nothing keeps every early member.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

import t2n
from t2n.errors import ExportFrontendError, StateMutationError
from t2n.serialize.archive import read_artifact
from t2n.serialize.dat import read_dat
from t2n.serialize.overlap import EarlyWriter

X = torch.rand(2, 64)


@pytest.fixture(autouse=True)
def _early_members_written_before_the_trace(monkeypatch):
    """The writer thread writes every planned tensor before the compile starts (as on a
    fast disk with a slow trace), so the stale member is there whatever the timing."""
    start = EarlyWriter.start

    def start_and_wait(self):
        start(self)
        self._thread.join()
        return self

    monkeypatch.setattr(EarlyWriter, "start", start_and_wait)


class HalvesOnce(torch.nn.Module):
    """The first call halves its weight through ``.data`` (invisible to the counter)."""

    def __init__(self, how: str = "data") -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(64, 64)
        self.done = False
        self.how = how

    def forward(self, x):
        if not self.done:
            self.done = True
            if self.how == "data":
                self.lin.weight.data.mul_(0.5)
            elif self.how == "one":
                self.lin.weight.data[3, 5] = 7.0
            else:
                self.lin.weight.detach().numpy()[:] *= 0.5
        return self.lin(x)


def _weight(path: Path, name: str = "lin.weight.dat") -> np.ndarray:
    files = read_artifact(path)
    out = path.parent / f"{path.name}-{name}"
    out.write_bytes(files[name])
    return read_dat(out)


@pytest.mark.parametrize("form", ["m.tar", "m"])
@pytest.mark.parametrize("how", ["data", "one"])
def test_a_weight_the_forward_changes_is_written_as_the_graph_used_it(tmp_path, form, how):
    model = HalvesOnce(how).eval()
    before = model.lin.weight.detach().clone()
    art = t2n.export(model, (X,), tmp_path / form, check_io=True)
    after = model.lin.weight.detach().numpy()
    assert not np.array_equal(before.numpy(), after)
    np.testing.assert_array_equal(_weight(tmp_path / form), after)
    assert art.stats["overlap"]["written_early"] == 2


def test_export_equals_compile_then_save(tmp_path):
    model = HalvesOnce().eval()
    t2n.export(model, (X,), tmp_path / "e.tar")
    fresh = HalvesOnce().eval()
    t2n.compile(fresh, (X,)).save(tmp_path / "s.tar")
    assert (tmp_path / "e.tar").read_bytes() == (tmp_path / "s.tar").read_bytes()


def test_dropin_export_writes_the_changed_weight(tmp_path):
    model = HalvesOnce().eval()
    path = t2n.export_model_to_nnef(model, (X,), tmp_path / "m.nnef", t2n.TractNNEF())
    assert str(path).endswith(".tar") and tarfile.is_tarfile(path)
    np.testing.assert_array_equal(_weight(Path(path)), model.lin.weight.detach().numpy())


@pytest.mark.parametrize("how, frontend", [("numpy", "jit"), ("data", "export")])
def test_writes_the_frontend_cannot_follow_are_refused_and_leave_nothing(tmp_path, how, frontend):
    """A numpy write hides from the trace, a ``.data`` write from torch.export: both are
    refused by name, and the weights written early are not left behind."""
    with pytest.raises((StateMutationError, ExportFrontendError)) as info:
        t2n.export(HalvesOnce(how).eval(), (X,), tmp_path / "m.tar", frontend=frontend)
    assert "lin.weight" in str(info.value) or "lifted_tensor" in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_a_weight_changed_by_another_thread_while_compiling_is_rewritten(tmp_path, monkeypatch):
    from t2n.frontend.jit import frontend as jit_frontend

    model = HalvesOnce().eval()
    model.done = True
    lower_ = jit_frontend.lower

    def lower_then_edit(*args, **kwargs):
        graph = lower_(*args, **kwargs)
        model.lin.weight.data.mul_(0.5)  # as another thread would, mid-compile
        return graph

    monkeypatch.setattr(jit_frontend, "lower", lower_then_edit)
    t2n.export(model, (X,), tmp_path / "m.tar")
    np.testing.assert_array_equal(_weight(tmp_path / "m.tar"), model.lin.weight.detach().numpy())


def test_a_model_that_writes_nothing_keeps_every_early_member(tmp_path):
    model = HalvesOnce().eval()
    model.done = True
    art = t2n.export(model, (X,), tmp_path / "m.tar")
    assert art.stats["overlap"]["kept"] == art.stats["overlap"]["written_early"] == 2
