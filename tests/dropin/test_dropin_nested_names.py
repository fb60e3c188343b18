"""``export_model_to_nnef`` names nested inputs and outputs as the widely used exporter
does: ``input_names``/``output_names`` name the forward's arguments and top-level
outputs; a tensor inside a tuple, list, dict or dataclass is ``<name>_<position or
key>``; names of non-tensor arguments are dropped; missing names are ``input_<i>`` /
``output_<i>``. Every artifact is run in tract by the entry point (its check is on by
default). ``t2n.compile`` stays strict and says how the drop-in would name them.
"""

import dataclasses
import logging
import tarfile
import typing

import numpy as np
import pytest
import torch

import t2n
from t2n.errors import IONamesMismatchError
from t2n.testing import Lambda

X, Y, Z = torch.rand(2, 3), torch.rand(2, 3), torch.rand(2, 3)


@dataclasses.dataclass
class Pair:
    a: torch.Tensor
    scale: int
    b: torch.Tensor


@dataclasses.dataclass(frozen=True)
class Frozen:
    p: torch.Tensor
    q: torch.Tensor


class Point(typing.NamedTuple):
    p: torch.Tensor
    q: torch.Tensor


CASES = {
    # name: (forward, args, input_names, output_names, expected inputs, expected outputs)
    "tuple_argument": (lambda a, t: a + t[0] * t[1], (X, (Y, Z)), ["a", "tup"], ["o"],
                       ["a", "tup_0", "tup_1"], ["o"]),
    "list_argument": (lambda a, t: a + t[0] * t[1], (X, [Y, Z]), ["a", "lst"], ["o"],
                      ["a", "lst_0", "lst_1"], ["o"]),
    "dict_argument": (lambda a, d: a + d["k1"] * d["k2"], (X, {"k1": Y, "k2": Z}), ["a", "dic"], ["o"],
                      ["a", "dic_k1", "dic_k2"], ["o"]),
    "nested_dict": (lambda a, d: a + d["p"]["q"] + d["r"], (X, {"p": {"q": Y}, "r": Z}), ["a", "d"], ["o"],
                    ["a", "d_p_q", "d_r"], ["o"]),
    "nested_tuple": (lambda a, t: a + t[0][0] * t[0][1] + t[1], (X, ((Y, Z), Y)), ["a", "t"], ["o"],
                     ["a", "t_0_0", "t_0_1", "t_1"], ["o"]),
    "dataclass": (lambda a, d: a * d.scale + d.a - d.b, (X, Pair(Y, 3, Z)), ["a", "dc"], ["o"],
                  ["a", "dc_a", "dc_b"], ["o"]),
    "frozen_dataclass": (lambda a, d: a + d.p * d.q, (X, Frozen(Y, Z)), ["a", "f"], ["o"],
                         ["a", "f_p", "f_q"], ["o"]),
    "named_tuple": (lambda a, d: a + d.p * d.q, (X, Point(Y, Z)), ["a", "nt"], ["o"],
                    ["a", "nt_0", "nt_1"], ["o"]),
    "int_argument": (lambda a, n, b: a * n + b, (X, 3, Y), ["a", "n", "b"], ["o"], ["a", "b"], ["o"]),
    "bool_argument": (lambda a, flag, b: a + b if flag else a - b, (X, True, Y), ["a", "flag", "b"], ["o"],
                      ["a", "b"], ["o"]),
    "int_inside_tuple": (lambda a, t: a * t[0] + t[1], (X, (2, Y)), ["a", "t"], ["o"], ["a", "t_1"], ["o"]),
    "fewer_names": (lambda a, n, b: a * n + b, (X, 3, Y), ["a"], ["o"], ["a", "input_2"], ["o"]),
    "tuple_outputs": (lambda a, b: (a + b, (a - b, a * b)), (X, Y), ["a", "b"], ["s", "t"],
                      ["a", "b"], ["s", "t_0", "t_1"]),
    "dict_output": (lambda a, b: {"s": a + b, "d": a - b}, (X, Y), ["a", "b"], ["o"], ["a", "b"], ["o_s", "o_d"]),
    "dict_output_unnamed": (lambda a, b: {"s": a + b, "d": a - b}, (X, Y), ["a", "b"], None,
                            ["a", "b"], ["output_0_s", "output_0_d"]),
    "mixed_outputs": (lambda a, b: (a, {"s": a + b, "d": a - b}), (X, Y), ["a", "b"], ["o", "p"],
                      ["a", "b"], ["o", "p_s", "p_d"]),
    "fewer_output_names": (lambda a, b: (a + b, a - b), (X, Y), ["a", "b"], ["o"], ["a", "b"], ["o", "output_1"]),
    "non_tensor_outputs": (lambda a, b: (a + b, None, a - b, 3), (X, Y), ["a", "b"], ["o", "n", "p", "k"],
                           ["a", "b"], ["o", "p"]),
    "no_names": (lambda a, t: {"k": a - t[1]}, (X, (Y, Z)), None, None,
                 ["input_0", "input_1_0", "input_1_1"], ["output_0_k"]),
}


def _signature(path):
    with tarfile.open(path) as tar:
        text = tar.extractfile("graph.nnef").read().decode()
    line = next(ln for ln in text.splitlines() if ln.startswith("graph "))
    ins, outs = line[line.index("(") + 1:line.index(")")], line[line.rindex("(") + 1:line.rindex(")")]
    return [s.strip() for s in ins.split(",")], [s.strip() for s in outs.split(",")]


@pytest.mark.parametrize("name", list(CASES))
def test_nested_names_follow_the_exporters_rule_and_run_in_tract(tmp_path, name):
    fn, args, ins, outs, want_ins, want_outs = CASES[name]
    path = t2n.export_model_to_nnef(Lambda(fn), args, tmp_path / "m.nnef", t2n.TractNNEF.latest(),
                                    input_names=ins, output_names=outs)
    assert _signature(path) == (want_ins, want_outs)


def test_names_past_the_arguments_are_ignored_with_a_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="t2n"):
        path = t2n.export_model_to_nnef(Lambda(lambda a, b: a + b), (X, Y), tmp_path / "m.nnef",
                                        t2n.TractNNEF.latest(), input_names=["a", "b", "c"], output_names=["o"])
    assert _signature(path) == (["a", "b"], ["o"])
    assert "['c'] name nothing" in caplog.text


def test_a_nested_input_takes_dynamic_axes_by_its_flat_name(tmp_path):
    target = t2n.TractNNEF.latest(dynamic_axes={"tup_0": {1: "S"}, "tup_1": {1: "S"}, "a": {1: "S"}})
    path = t2n.export_model_to_nnef(Lambda(lambda a, t: a + t[0] * t[1]), (X, (Y, Z)), tmp_path / "m.nnef",
                                    target, input_names=["a", "tup"], output_names=["o"])
    with tarfile.open(path) as tar:
        assert "external<scalar>(shape = [2, S])" in tar.extractfile("graph.nnef").read().decode()


@pytest.mark.parametrize("what, kwargs, args, fn, named", [
    ("input", {"input_names": ["a", "tup"]}, (X, (Y, Z)), lambda a, t: a + t[0] * t[1], "['a', 'tup_0', 'tup_1']"),
    ("input", {"input_names": ["a", "n", "b"]}, (X, 3, Y), lambda a, n, b: a * n + b, "['a', 'b']"),
    ("output", {"output_names": ["o"]}, (X,), lambda a: {"s": a + 1, "d": a - 1}, "['o_s', 'o_d']"),
])
def test_compile_refuses_names_per_argument_and_says_how_the_dropin_names_them(what, kwargs, args, fn, named):
    with pytest.raises(IONamesMismatchError) as info:
        t2n.compile(Lambda(fn), args, **kwargs)
    assert f"as t2n.export_model_to_nnef takes them, they would name the tensors {named}" in str(info.value)


def test_compile_makes_the_tensors_of_a_dataclass_argument_inputs():
    """They were constants of the trace before: the artifact ignored new values."""
    model = Lambda(lambda a, d: a * d.scale + d.a - d.b)
    art = t2n.compile(model, (X, Pair(Y, 3, Z)))
    assert art.input_names == ["input_0", "input_1_a", "input_1_b"]
    x, y, z = (torch.rand(2, 3) for _ in range(3))
    want = model(x, Pair(y, 3, z)).numpy()
    assert art.check(inputs=[x.numpy(), y.numpy(), z.numpy()], expected=[want]).ok
    assert not np.allclose(want, model(X, Pair(Y, 3, Z)).numpy())


def test_a_dataclass_output_is_flattened_by_field():
    art = t2n.compile(Lambda(lambda a, b: Frozen(a + b, a * b)), (X, Y))
    assert art.output_names == ["p", "q"]
    assert art.check().ok
