"""Scripted loops: a trip count the example inputs' sizes fix is unrolled by JIT
hardening (lists grown by ``append`` resolved); one the data decides is refused, naming
the loop's source line. Artifacts run in tract (and the Khronos interpreter)."""

from __future__ import annotations

import inspect

import pytest
import torch

import t2n
from t2n.errors import DataDependentLoopError, TraceError
from t2n.testing import check_export


class ChunkedLinear(torch.nn.Module):
    """A streaming model: fixed-size chunks, each through a layer, appended and stacked."""

    def __init__(self, chunk: int = 4) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(6, 5)
        self.chunk = chunk

    def forward(self, x):
        outs: list[torch.Tensor] = []
        for i in range(x.size(1) // self.chunk):
            outs.append(self.lin(x[:, i * self.chunk:(i + 1) * self.chunk]))
        return torch.stack(outs, 1)


class SplitThenCat(torch.nn.Module):
    def forward(self, x):
        outs: list[torch.Tensor] = []
        for part in torch.split(x, 3, 1):
            outs.append(part.sum(1, keepdim=True) * 2.0)
        first = outs[0]
        return torch.cat(outs, 1) + outs[-1] * float(len(outs)) - first


class SizeBoundedWhile(torch.nn.Module):
    """A recurrence written as a while loop over the time axis, collecting states."""

    def forward(self, x):
        h = torch.zeros(x.size(0), x.size(2))
        states: list[torch.Tensor] = []
        t = 0
        while t < x.size(1):
            h = torch.tanh(x[:, t] + 0.5 * h)
            states.append(h)
            t += 1
        return torch.stack(states, 1), h


class GrowToSize(torch.nn.Module):
    """The bound reads the size of a tensor the loop itself grows: settled one probe at
    a time."""

    def forward(self, x):
        y = x
        while y.size(0) < 8:
            y = torch.cat([y, y[:1] * 2.0], 0)
        return y


class ReadsItsList(torch.nn.Module):
    """The loop reads the list it grows (its length and last element) while growing it."""

    def forward(self, x):
        outs: list[torch.Tensor] = []
        for i in range(x.size(1) // 2):
            c = x[:, 2 * i:2 * i + 2]
            if len(outs) > 0:
                c = c + outs[-1]
            outs.append(c)
        return torch.cat(outs, 1)


class Nested(torch.nn.Module):
    def forward(self, x):
        rows: list[torch.Tensor] = []
        for i in range(x.size(0)):
            acc = x[i]
            for _ in range(2):
                acc = acc * 0.5 + 1.0
            rows.append(acc)
        return torch.stack(rows, 0)


class DataTripCount(torch.nn.Module):
    def forward(self, x):
        y = x
        for _ in range(int(x.abs().sum()) % 3 + 1):  # LOOP-LINE
            y = y * 2.0
        return y


class DataWhile(torch.nn.Module):
    def forward(self, x):
        y = x
        while bool(y.abs().sum() < 100.0):  # LOOP-LINE
            y = y * 2.0
        return y


def _line_of_marker(cls: type) -> int:
    lines, start = inspect.getsourcelines(cls)
    return start + next(i for i, text in enumerate(lines) if "LOOP-LINE" in text)


@pytest.mark.parametrize("model, x", [
    (ChunkedLinear(), torch.randn(2, 12, 6)),
    (SplitThenCat(), torch.randn(2, 12, 3)),
    (SizeBoundedWhile(), torch.randn(2, 7, 5)),
    (Nested(), torch.randn(3, 4)),
    (GrowToSize(), torch.randn(3, 4)),
    (ReadsItsList(), torch.randn(2, 8)),
], ids=["chunks-append-stack", "split-append-cat-index-len", "while-over-time", "nested", "grow-to-size",
        "reads-its-list"])
def test_loops_with_a_size_fixed_trip_count_are_unrolled_and_run(model, x):
    scripted = torch.jit.script(model.eval())
    diag: dict[str, object] = {}
    hardened = t2n.harden_jit_for_export(scripted, (x,), diagnostics=diag)
    text = str(hardened.graph)
    assert "prim::Loop" not in text and "aten::append" not in text
    assert diag["unroll_constant_loops"]
    assert diag["resolve_list_appends"] or isinstance(model, GrowToSize)
    torch.testing.assert_close(hardened(x), scripted(x))
    check_export(scripted, (x,))


def test_unrolled_chunks_follow_the_example_size():
    scripted = torch.jit.script(ChunkedLinear(chunk=3).eval())
    for length in (6, 9):
        x = torch.randn(1, length, 6)
        art = t2n.compile(scripted, (x,))
        assert art.check().ok
        assert art.ir.outputs[0].type.shape[1] == length // 3


@pytest.mark.parametrize("cls", [DataTripCount, DataWhile])
def test_data_dependent_loops_are_refused_naming_their_line(cls, tmp_path):
    scripted = torch.jit.script(cls().eval())
    out = tmp_path / "model.nnef.tgz"
    with pytest.raises(DataDependentLoopError) as info:
        t2n.export(scripted, (torch.randn(2, 3),), out)
    assert isinstance(info.value, TraceError)
    message = str(info.value)
    assert f"line {_line_of_marker(cls)}" in message and __file__ in message
    assert "What to do" in message and "size" in message
    assert len(info.value.places) == 1
    assert not out.exists() and not list(tmp_path.iterdir())


def test_a_while_loop_too_long_to_unroll_is_refused_naming_its_line():
    class Long(torch.nn.Module):
        def forward(self, x):
            y, i = x, 0
            while i < x.size(0) * 1000:  # LOOP-LINE
                y = y + 1.0
                i += 1
            return y

    with pytest.raises(TraceError, match="too many to unroll") as info:
        t2n.harden_jit_for_export(torch.jit.script(Long().eval()), (torch.randn(5),))
    assert f"line {_line_of_marker(Long)}" in str(info.value)


def test_a_list_changed_by_other_list_ops_is_left_and_named_by_the_lowering():
    class Inserts(torch.nn.Module):
        def forward(self, x):
            outs: list[torch.Tensor] = []
            for i in range(x.size(0)):
                outs.append(x[i])
            outs.insert(0, x[0])  # LOOP-LINE
            return torch.stack(outs, 0)

    with pytest.raises(t2n.errors.UnsupportedOpsError) as info:
        t2n.compile(torch.jit.script(Inserts().eval()), (torch.randn(3, 2),))
    assert "aten::insert" in str(info.value) and f"line {_line_of_marker(Inserts)}" in str(info.value)
