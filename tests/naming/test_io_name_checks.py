"""check_io_names_qte_match and allow_same_io_names.

Bad inputs tried here (14): a name for a None output; for an int output; for a None
positional argument; for a None keyword argument; too few names (refused even without
the check); too many names with nothing to explain them; the same through export
(nothing written); non-bool flags (2); an output named like an input without
allow_same_io_names (refused before the trace); a same-named output that the model
computes; a same-named output on Khronos NNEF (refused before the trace); a name for a
None output with the check off (dropped, the artifact runs); extra names with the
check off (the first ones kept). Inputs the model does not use, or only reads the size
of, stay inputs: their names still match.
"""

import logging

import numpy as np
import pytest
import torch

import t2n
from t2n.errors import InvalidArgumentError, IONamesMismatchError, SameIONameError

X = torch.rand(2, 3)


class Counting(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return super().__call__(*args, **kwargs)


class NoneOut(Counting):
    def forward(self, x):
        return x * 2, None


class IntOut(Counting):
    def forward(self, x):
        return x * 2, 3


class MaybeMask(Counting):
    def forward(self, x, mask=None):
        return x * 2 if mask is None else x * mask


class Unused(Counting):
    def forward(self, x, y):
        return x + 1


class SizeOnly(Counting):
    def forward(self, x, y):
        return x * y.shape[0]


class PassLength(Counting):
    def forward(self, x, length):
        return x * 2, length


class DoubledLength(Counting):
    def forward(self, x, length):
        return x * 2, length * 2


def _mismatch(model, args, **kw):
    with pytest.raises(IONamesMismatchError) as info:
        t2n.compile(model, args, **kw)
    return str(info.value)


def test_a_name_for_a_none_output_is_refused_naming_it():
    msg = _mismatch(NoneOut(), (X,), output_names=["y", "extra"])
    assert "'extra' names output 1, which is None, not a tensor" in msg
    assert "remove this name from output_names" in msg and "check_io_names_qte_match=False" in msg


def test_a_name_for_an_int_output_is_refused_naming_it():
    msg = _mismatch(IntOut(), (X,), output_names=["y", "n"])
    assert "'n' names output 1, which is 3, not a tensor" in msg


def test_a_name_for_a_none_argument_is_refused_naming_it():
    msg = _mismatch(MaybeMask(), (X, None), input_names=["x", "mask"])
    assert "'mask' names argument 1, which is None, not a tensor" in msg
    assert "input_names" in msg


def test_a_name_for_a_none_keyword_argument_is_refused_naming_it():
    msg = _mismatch(MaybeMask(), (X,), kwargs={"mask": None}, input_names=["x", "mask"])
    assert "'mask' names keyword argument 'mask', which is None" in msg


def test_too_few_names_are_refused_even_without_the_check():
    with pytest.raises(IONamesMismatchError) as info:
        t2n.compile(PassLength(), (X, X), output_names=["y"], check_io_names_qte_match=False)
    msg = str(info.value)
    assert "1 output names given but the model has 2 output tensors" in msg
    assert "(in order: output 0, output 1)" in msg and "one name per output tensor" in msg


def test_too_many_names_are_refused_with_what_the_model_has():
    msg = _mismatch(Unused(), (X, X), output_names=["a", "b", "c"])
    assert "3 output names given but the model has 1 output tensors (in order: the output)" in msg
    assert "check_io_names_qte_match=False" in msg


def test_export_with_mismatched_names_writes_nothing(tmp_path):
    with pytest.raises(IONamesMismatchError, match="'extra' names output 1"):
        t2n.export(NoneOut(), (X,), tmp_path / "m.nnef.tgz", output_names=["y", "extra"])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("flag", ["check_io_names_qte_match", "allow_same_io_names"])
def test_flags_must_be_bools(flag):
    model = NoneOut()
    with pytest.raises(InvalidArgumentError, match=f"{flag} must be True or False, got 'yes'"):
        t2n.compile(model, (X,), **{flag: "yes"})
    assert model.calls == 0


def test_check_off_drops_names_of_non_tensors_and_runs(caplog):
    with caplog.at_level(logging.WARNING, logger="t2n"):
        art = t2n.compile(NoneOut(), (X,), output_names=["y", "extra"], check_io_names_qte_match=False)
    assert art.output_names == ["y"] and "graph main(input_0) -> (y)" in art.graph_nnef
    assert "'extra' names output 1, which is None" in caplog.text
    assert art.check().ok


def test_check_off_keeps_the_first_names_when_nothing_explains_the_extra_ones(caplog):
    with caplog.at_level(logging.WARNING, logger="t2n"):
        art = t2n.compile(Unused(), (X, X), output_names=["a", "b"], check_io_names_qte_match=False)
    assert art.output_names == ["a"] and "['b'] dropped" in caplog.text
    assert art.check().ok


@pytest.mark.parametrize("model", [Unused(), SizeOnly()], ids=["unused", "size-only"])
def test_inputs_the_model_ignores_stay_inputs_so_names_match(model):
    y = torch.rand(4, 3)
    art = t2n.compile(model, (X, y), input_names=["x", "y"], output_names=["out"])
    assert art.input_names == ["x", "y"] and "graph main(x, y) -> (out)" in art.graph_nnef
    assert art.check().ok


def test_same_name_needs_allow_same_io_names_and_is_refused_before_the_trace():
    model = PassLength()
    with pytest.raises(SameIONameError) as info:
        t2n.compile(model, (X, torch.tensor([3])), input_names=["x", "length"], output_names=["y", "length"])
    msg = str(info.value)
    assert "output name 'length' is also an input name" in msg and "allow_same_io_names=True" in msg
    assert isinstance(info.value, InvalidArgumentError) and model.calls == 0


def test_same_name_pass_through_runs_in_tract():
    length = torch.tensor([3, 5])
    art = t2n.compile(PassLength(), (X, length), input_names=["x", "length"], output_names=["y", "length"],
                      allow_same_io_names=True)
    assert art.input_names == ["x", "length"] and art.output_names == ["y", "length"]
    assert "graph main(x, length) -> (y, length)" in art.graph_nnef
    assert "copy(" not in art.graph_nnef
    report = art.check(t2n.Tolerance.EXACT)
    assert report.ok
    other = [X.numpy() + 1, np.array([7, 8], dtype=np.int64)]
    assert art.check(inputs=other, expected=[other[0] * 2, other[1]]).ok


def test_same_name_on_a_computed_output_is_refused_naming_the_op():
    with pytest.raises(SameIONameError) as info:
        t2n.compile(DoubledLength(), (X, torch.tensor([3])), input_names=["x", "length"],
                    output_names=["y", "length"], allow_same_io_names=True)
    msg = str(info.value)
    assert "output 'length' has the name of input 'length' but is not that input unchanged" in msg
    assert "'mul'" in msg and "forward" in msg and "give this output another name" in msg


def test_same_name_on_khronos_is_refused_before_the_trace():
    model = PassLength()
    with pytest.raises(SameIONameError) as info:
        t2n.compile(model, (X, torch.tensor([3.0])), t2n.KhronosNNEF(), input_names=["x", "length"],
                    output_names=["y", "length"], allow_same_io_names=True)
    msg = str(info.value)
    assert "KhronosNNEF('1.0.5') cannot express" in msg and "'length'" in msg and "TractNNEF" in msg
    assert model.calls == 0


class PassTwo(Counting):
    def forward(self, x, length, length_out):
        return x + length_out, length


def test_same_name_beside_names_like_the_internal_stand_in():
    args = (X, torch.tensor([3]), torch.rand(2, 3))
    art = t2n.compile(PassTwo(), args, input_names=["x", "length", "length_out"],
                      output_names=["y", "length"], allow_same_io_names=True)
    assert "graph main(x, length, length_out) -> (y, length)" in art.graph_nnef
    assert art.check().ok
