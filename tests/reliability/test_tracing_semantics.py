"""Never a silently wrong artifact from tracing.

* values the trace took from the example inputs' data: a ``SpecializedTraceWarning``
  naming the source line and module (``strict=True``: ``SpecializedTraceError``);
* a forward that writes its own parameters or buffers: the artifact computes what
  PyTorch computed on the traced call (checked in tract), or ``StateMutationError``;
* weights changed between ``compile`` and ``save``/``check``: ``WeightsChangedError``,
  nothing written;
* ``.data`` of an input or of a tensor ``forward`` made (which the tracer alone stores as
  a constant): traced as ``detach()``, so reads follow other inputs and writes through it
  reach the artifact;
* what the trace still leaves out (a write through a NumPy view into a tensor ``forward``
  made): the traced graph, replayed on the example inputs, differs from what ``forward``
  returned, an ``UntracedEffectWarning`` naming the output (``strict=True``:
  ``UntracedEffectError``, nothing written), and the artifact really differs in tract.
  Models the trace records fully give none: the suite turns the warning into an error
  (pyproject's ``filterwarnings``), so every other test is a check against false alarms.
"""

from __future__ import annotations

import copy
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import t2n
from t2n.errors import (
    CheckMismatchError,
    SerializationError,
    SpecializedTraceError,
    StateMutationError,
    TraceError,
    UntracedEffectError,
    WeightsChangedError,
)
from t2n.frontend.trace import trace_module
from t2n.testing import Lambda

HERE = Path(__file__).name


def line_of(fn, text: str) -> int:
    """The line of ``fn``'s source that contains ``text``."""
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def specializations(model, args, **kw) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t2n.compile(model, args, **kw)
    return [w for w in caught if issubclass(w.category, t2n.SpecializedTraceWarning)]


# -- 1. values taken from the inputs' data ---------------------------------------------


class Branch(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


class ItemScale(nn.Module):
    def forward(self, x):
        return x * x.max().item()


class IntIndex(nn.Module):
    def forward(self, x):
        k = int(x[0, 0] * 3)
        return x[:, : k + 1]


class FloatScale(nn.Module):
    def forward(self, x):
        return x / float(x.abs().sum())


class ToList(nn.Module):
    def forward(self, x):
        first = x[0].tolist()
        return x + first[0]


class TensorOfTensors(nn.Module):
    def forward(self, x):
        return x + torch.tensor([x[0, 0], x[0, 1], x[0, 2]])


class SplitBy(nn.Module):
    """The conversion happens inside torch's own Python code (``Tensor.split``)."""

    def forward(self, x):
        n = (x[0, 0] > 0.5).long() + 1
        return x.split(n, dim=1)[0]


class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Linear(3, 3), Branch())

    def forward(self, x):
        return self.block(x)


CASES = [
    (Branch(), "if x.sum() > 0", "Python bool", ""),
    (ItemScale(), "x.max().item()", ".item()", ""),
    (IntIndex(), "int(x[0, 0] * 3)", "int(tensor)", ""),
    (FloatScale(), "float(x.abs().sum())", "float(tensor)", ""),
    (ToList(), "x[0].tolist()", ".tolist()", ""),
    (TensorOfTensors(), "torch.tensor([x[0, 0]", "torch.tensor", ""),
    (SplitBy(), "x.split(n, dim=1)", "Python integer", ""),
    (Outer(), "if x.sum() > 0", "Python bool", "block.1"),
]


@pytest.mark.parametrize("model,code,what,module", CASES, ids=[type(c[0]).__name__ for c in CASES])
def test_a_value_from_input_data_is_a_warning_naming_line_and_module(model, code, what, module):
    x = torch.rand(2, 3) + 0.5
    found = specializations(model.eval(), (x,))
    assert len(found) == 1, [str(w.message) for w in found]
    w = found[0]
    src = type(model.block[1] if module else model).forward
    line = line_of(src, code)
    assert Path(w.filename).name == HERE and w.lineno == line   # shown at the model's line
    msg = str(w.message)
    assert f"{HERE}:{line}" in msg and code in msg and what in msg
    assert (f"module '{module}'" if module else "the top-level module") in msg
    assert "specialised to the example inputs" in msg and "What to do" in msg and "strict=True" in msg


def test_the_artifact_still_matches_pytorch_on_the_example():
    with pytest.warns(t2n.SpecializedTraceWarning):
        art = t2n.compile(Branch(), (torch.rand(2, 3),))
    art.check()
    assert "Python bool" in art.ir.info.specializations[0]


def test_strict_lists_every_place_at_once_and_writes_nothing(tmp_path):
    class Many(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                x = x + 1
            return x * x.max().item() + x[0].tolist()[0]

    with pytest.raises(SpecializedTraceError) as info:
        t2n.export(Many(), (torch.rand(2, 3),), tmp_path / "m.nnef.tar", strict=True)
    assert isinstance(info.value, TraceError)
    assert len(info.value.places) == 3
    msg = str(info.value)
    for code in ("if x.sum() > 0", ".item()", ".tolist()"):
        assert code in msg
    assert "nothing was written" in msg and "What to do" in msg
    assert list(tmp_path.iterdir()) == []


def test_a_line_hit_many_times_is_one_warning_with_its_count():
    class Loop(nn.Module):
        def forward(self, x):
            for i in range(4):
                if x[i].sum() > 0:
                    x = x + 1
            return x

    found = specializations(Loop(), (torch.rand(4, 3),))
    assert len(found) == 1 and "(4 times)" in str(found[0].message)


def test_sizes_constants_and_parameters_are_not_reported():
    class Quiet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("flag", torch.ones(()))
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            if self.flag > 0:                     # a buffer: the artifact holds it anyway
                x = x + 1
            if x.shape[1] > 2:                    # a size: static without dynamic axes
                x = x * 2
            n = int(x.shape[0])
            if self.lin.weight.abs().sum() > 0:   # parameters only
                x = x - 1
            return self.lin(x) + torch.tensor([1.0, 2.0, 3.0]) * n

    with warnings.catch_warnings():
        warnings.simplefilter("error", t2n.SpecializedTraceWarning)
        art = t2n.compile(Quiet(), (torch.rand(2, 3),), strict=True)
    art.check()


class KeepsAtMost(nn.Module):
    """SuperPoint's ``top_k_keypoints``: a branch on how many points a threshold kept."""

    def forward(self, x):
        points = torch.nonzero(x > 0.5)
        if len(points) <= 3:  # line: len of data
            return points.float()
        return points.float() * 2


def test_len_of_a_selection_sized_by_data_is_reported():
    found = specializations(KeepsAtMost(), (torch.rand(4, 4),))
    assert len(found) == 1
    message = str(found[0].message)
    assert f"{HERE}:{line_of(KeepsAtMost.forward, 'line: len of data')}" in message and "index or size" in message


def test_a_length_from_data_made_a_python_int_is_reported():
    def fn(x):
        return x * int(torch.nonzero(x > 0.5).shape[0])  # line: int of data length

    found = specializations(Lambda(fn), (torch.rand(4, 4),))
    assert len(found) == 1 and "Python int" in str(found[0].message)


def test_len_of_inputs_and_of_static_selections_is_not_reported():
    def fn(x):
        kept = x[torch.tensor([True, False, True])]  # a mask known at export: a static length
        return x * len(x) + len(kept)

    assert specializations(Lambda(fn), (torch.rand(3, 2),)) == []


# -- 2. forward writes its own parameters or buffers -----------------------------------


class ScaleOnFirstCall(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.scaled = False

    def forward(self, x):
        if not self.scaled:
            self.lin.weight.mul_(2)
            self.scaled = True
        return self.lin(x)


def test_weight_scaled_on_first_call_is_exported_as_that_call_computed():
    model = ScaleOnFirstCall().eval()
    w0 = model.lin.weight.detach().clone()
    x = torch.rand(2, 4)
    with torch.no_grad():
        expected = copy.deepcopy(model)(x)            # what PyTorch computes on that call
    art = t2n.compile(model, (x,))
    torch.testing.assert_close(model.lin.weight.detach(), 2 * w0)   # mutated once, as the call does
    np.testing.assert_allclose(art.reference_outputs[0], expected.numpy(), rtol=1e-6)
    art.check()                                      # tract computes the same


class Counter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, x):
        self.steps += 1
        return x * self.steps


def test_buffer_counter_is_incremented_once_in_the_artifact():
    model = Counter()
    art = t2n.compile(model, (torch.rand(3),))
    assert model.steps.item() == 1
    art.check()
    np.testing.assert_allclose(art.reference_outputs[0], art.example_inputs[0])


class RunningMean(nn.Module):
    """Running statistics updated from the input: the write depends on the data."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.full((3,), 0.5))

    def forward(self, x):
        self.mean.mul_(0.9).add_(0.1 * x.mean(0))
        return x - self.mean


def test_running_statistics_are_computed_from_the_inputs_not_baked():
    model = RunningMean()
    fresh = copy.deepcopy(model)
    art = t2n.compile(model, (torch.rand(2, 3),))
    art.check()
    other = torch.rand(2, 3) * 10                     # not the example: the update follows it
    art.check(inputs=[other.numpy()], expected=[fresh(other).numpy()])


def test_a_write_into_a_view_of_a_parameter_starts_from_its_old_value():
    class Row(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.rand(3, 3))

        def forward(self, x):
            self.w[0] = 5.0
            self.w[:, 1].mul_(2)
            return x @ self.w

    model = Row()
    w0 = model.w.detach().clone()
    art = t2n.compile(model, (torch.rand(2, 3),))
    expected = w0.clone()
    expected[0] = 5.0
    expected[:, 1] *= 2
    torch.testing.assert_close(model.w.detach(), expected)
    art.check()


def test_a_write_through_data_before_any_read_exports_the_value_read():
    class DataWrite(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            self.lin.weight.data.mul_(2)
            return self.lin(x)

    art = t2n.compile(DataWrite(), (torch.rand(2, 3),))
    art.check()


def test_a_write_through_data_after_a_read_is_refused(tmp_path):
    class LateDataWrite(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            y = self.lin(x)
            self.lin.weight.data.mul_(2)
            return y + self.lin(x)

    with pytest.raises(StateMutationError) as info:
        t2n.export(LateDataWrite(), (torch.rand(2, 3),), tmp_path / "m.nnef.tar")
    msg = str(info.value)
    line = line_of(LateDataWrite.forward, "weight.data.mul_")
    assert "'lin.weight'" in msg and "`mul_`" in msg and f"{HERE}:{line}" in msg
    assert "after the trace had read it" in msg and "What to do" in msg
    assert isinstance(info.value, TraceError)
    assert list(tmp_path.iterdir()) == []


def test_input_data_written_through_data_is_a_specialisation():
    class Cache(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("last", torch.zeros(3))

        def forward(self, x):
            self.last.data.copy_(x)
            return self.last * 2

    found = specializations(Cache(), (torch.rand(3),))
    assert len(found) == 1 and "'last'" in str(found[0].message) and ".data" in str(found[0].message)


class TrainingNorm(nn.Module):
    """Batch statistics, with running statistics updated inside the kernel (no version
    counter moves)."""

    def __init__(self, read_before: bool) -> None:
        super().__init__()
        self.register_buffer("rm", torch.zeros(3))
        self.register_buffer("rv", torch.ones(3))
        self.read_before = read_before

    def forward(self, x):
        if self.read_before:
            x = x + self.rm
        y = nn.functional.batch_norm(x, self.rm, self.rv, training=True)
        return y + self.rm


def test_running_statistics_updated_inside_an_op_export_the_updated_value():
    model = TrainingNorm(read_before=False)
    art = t2n.compile(model, (torch.rand(4, 3),))
    assert model.rm.abs().sum() > 0                  # updated once, by the traced call
    art.check()


def test_a_read_before_a_write_inside_an_op_is_refused_naming_tensor_and_op():
    with pytest.raises(StateMutationError) as info:
        t2n.compile(TrainingNorm(read_before=True), (torch.rand(4, 3),))
    msg = str(info.value)
    line = line_of(TrainingNorm.forward, "x = x + self.rm")
    assert "'rm'" in msg and "aten::add" in msg and f"{HERE}({line})" in msg and "What to do" in msg


def test_a_write_by_a_torch_ops_overload_starts_from_the_old_value():
    class OpWrite(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("steps", torch.ones(()))

        def forward(self, x):
            torch.ops.aten.add_.Tensor(self.steps, 1)
            return x * self.steps

    art = t2n.compile(OpWrite(), (torch.rand(3),))
    np.testing.assert_allclose(art.reference_outputs[0], 2 * art.example_inputs[0])
    art.check()


# -- 3. weights changed between compile and save ---------------------------------------


def conv_bn() -> nn.Module:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 2, 1)).eval()
    with torch.no_grad():
        m[1].running_mean.uniform_(-1, 1)
        m[1].running_var.uniform_(0.5, 2)
        m[1].weight.uniform_(0.5, 2)
        m[1].bias.uniform_(-1, 1)
    return m


def _mul_no_grad(m):
    with torch.no_grad():
        m[3].weight.mul_(2)


def _mul_data(m):
    m[3].weight.data.mul_(2)


def _load_state(m):
    state = {k: v * 2 if k == "3.weight" else v for k, v in m.state_dict().items()}
    m.load_state_dict(state)


def _folded_weight(m):
    with torch.no_grad():
        m[0].weight.mul_(2)          # folded with the batch norm into a new tensor


def _bn_stats(m):
    m[1].running_var.data.fill_(3.0)


CHANGES = [(_mul_no_grad, "3.weight"), (_mul_data, "3.weight"), (_load_state, "3.weight"),
           (_folded_weight, "0.weight"), (_bn_stats, "1.running_var")]


@pytest.mark.parametrize("change,name", CHANGES, ids=[c[0].__name__.strip("_") for c in CHANGES])
@pytest.mark.parametrize("suffix", [".nnef.tar", ".nnef"])
def test_weights_changed_after_compile_are_refused_at_save(tmp_path, change, name, suffix):
    model = conv_bn()
    art = t2n.compile(model, (torch.rand(1, 3, 8, 8),))
    change(model)
    with pytest.raises(WeightsChangedError) as info:
        art.save(tmp_path / f"m{suffix}")
    assert isinstance(info.value, SerializationError)
    assert name in info.value.names                  # load_state_dict writes every tensor
    assert len(info.value.names) == 1 or change is _load_state
    assert f"'{name}'" in str(info.value) and "compile again" in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_check_refuses_changed_weights_too():
    model = conv_bn()
    art = t2n.compile(model, (torch.rand(1, 3, 8, 8),))
    _mul_data(model)
    with pytest.raises(WeightsChangedError, match="3.weight"):
        art.check()


def test_unchanged_weights_save_and_match_in_tract(tmp_path):
    model = conv_bn()
    art = t2n.compile(model, (torch.rand(1, 3, 8, 8),))
    assert art.stats["pass_stats"].get("fold-batch-norm.folded", 0) >= 1
    model(torch.rand(1, 3, 8, 8))                      # running it changes nothing
    art.save(tmp_path / "m.nnef.tar")
    art.check()


def test_export_after_compile_and_change_is_refused(tmp_path):
    model = conv_bn()
    art = t2n.compile(model, (torch.rand(1, 3, 8, 8),))
    _load_state(model)
    with pytest.raises(WeightsChangedError, match="'3.weight'.*compile again"):
        art.save(tmp_path / "m.nnef.tgz")
    t2n.export(model, (torch.rand(1, 3, 8, 8),), tmp_path / "again.nnef.tar").check()
    assert [p.name for p in tmp_path.iterdir()] == ["again.nnef.tar"]


def test_a_script_module_changed_after_compile_is_refused_too(tmp_path):
    model = torch.jit.script(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 2, 1)).eval())
    art = t2n.compile(model, (torch.rand(1, 3, 8, 8),))
    with torch.no_grad():
        model[2].weight.mul_(2)
    with pytest.raises(WeightsChangedError, match="'2.weight'"):
        art.save(tmp_path / "m.nnef.tar")
    assert list(tmp_path.iterdir()) == []


# -- 4. `.data`, and what the trace leaves out, found by replaying it -----------------

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


class ReadsThroughData(nn.Module):
    """``.data`` read of an input and of a computed tensor: the tracer alone would store
    both as constants (the artifact would not depend on ``x``)."""

    def forward(self, x):
        y = x.data * 2
        return (y + 1).data.sin() + x


class TableThroughNumpy(nn.Module):
    def forward(self, x):
        table = torch.zeros(3, 5)
        table.numpy()[1] = 1.5
        return x - table


def matches_on_other_inputs(model, art, *inputs) -> None:
    for x in inputs:
        with torch.no_grad():
            want = model(x)
        want = want if isinstance(want, tuple) else (want,)
        art.check(inputs=[x.numpy()], expected=[w.numpy() for w in want])


@pytest.mark.parametrize("model, shape", [(TableThroughData(), (2, 7, 6)), (ReadsThroughData(), (3, 5))],
                         ids=["write", "read"])
def test_data_of_inputs_and_computed_tensors_is_traced(model, shape):
    x = torch.randn(*shape)
    art = t2n.compile(model, (x,))  # no UntracedEffectWarning (an error in this suite)
    assert art.check().ok
    matches_on_other_inputs(model, art, torch.randn(*shape), torch.randn(*shape) * 10)


def test_a_write_through_numpy_is_found_and_the_artifact_really_differs():
    x = torch.randn(3, 5)
    with pytest.warns(t2n.UntracedEffectWarning, match="output 0 differs by up to 1.5 \\(5 of 15") as record:
        art = t2n.compile(TableThroughNumpy(), (x,))
    assert len(record) == 1 and "NumPy view" in str(record[0].message)
    with pytest.raises(CheckMismatchError):
        art.check()


def test_strict_refuses_and_writes_nothing(tmp_path):
    out = tmp_path / "model.nnef.tgz"
    with pytest.raises(UntracedEffectError, match="Nothing was written"):
        t2n.export(TableThroughNumpy(), (torch.randn(3, 5),), out, strict=True)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_data_of_a_parameter_read_in_forward_stays_its_value():
    """``.data`` of a parameter is read as its value: no finding, and the artifact holds it."""

    class ReadsData(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(4))

        def forward(self, x):
            return x * self.w.data

    model, x = ReadsData(), torch.randn(3, 4)
    assert trace_module(model, (x,), {}).untraced == []
    matches_on_other_inputs(model, t2n.compile(model, (x,)), torch.randn(3, 4))
