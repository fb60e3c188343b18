"""Unsupported ops are reported all at once, with where they are, before anything is written."""

import os

import pytest
import torch

import t2n
from t2n.errors import NotExpressibleError, UnsupportedOpsError
from t2n.frontend.registry import DuplicateRuleError


@torch.library.custom_op("t2ntest::mystery", mutates_args=())
def mystery(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@torch.library.custom_op("t2ntest::enigma", mutates_args=())
def enigma(x: torch.Tensor) -> torch.Tensor:
    return x + 1


class Inner(torch.nn.Module):
    def forward(self, x):
        return enigma(torch.relu(x))


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = torch.nn.Sequential(torch.nn.Linear(4, 4), Inner())

    def forward(self, x):
        return mystery(self.block(x)) + mystery(x)


def test_every_unsupported_op_is_listed_with_its_module(tmp_path):
    with pytest.raises(UnsupportedOpsError) as info:
        t2n.export(Model(), (torch.rand(2, 4),), tmp_path / "m.nnef.tar")
    err = info.value
    assert "t2ntest::mystery" in str(err) and "t2ntest::enigma" in str(err)
    assert "block.1" in str(err)
    assert [p.op for p in err.problems].count("t2ntest::mystery") == 2
    enigma_problem = next(p for p in err.problems if p.op == "t2ntest::enigma")
    assert enigma_problem.module == "block.1"
    assert "What to do" in str(err)
    assert os.listdir(tmp_path) == []


def test_a_user_rule_makes_it_supported():
    rules = t2n.RuleSet("mine")

    @rules.rule("t2ntest::mystery")
    def _mystery(ctx):
        x = ctx.tensor(0)
        return ctx.b.op("mul", x, ctx.as_value(2.0, x.type.dtype))

    @rules.rule("t2ntest::enigma")
    def _enigma(ctx):
        x = ctx.tensor(0)
        return ctx.b.op("add", x, ctx.as_value(1.0, x.type.dtype))

    registry = t2n.LoweringRegistry.default().extended(rules)
    art = t2n.compile(Model(), (torch.rand(2, 4),), registry=registry)
    assert art.check().ok


def test_duplicate_rules_raise_unless_overriding():
    rules = t2n.RuleSet("mine")
    rules.rule("aten::relu")(lambda ctx: ctx.tensor(0))
    with pytest.raises(DuplicateRuleError, match="aten::relu already has a rule .*override=True"):
        t2n.LoweringRegistry.default().extended(rules)
    assert "aten::relu" in t2n.LoweringRegistry.default().extended(rules, override=True)
    with pytest.raises(DuplicateRuleError, match="aten::relu has two rules in family mine"):
        rules.rule("aten::relu")(lambda ctx: ctx.tensor(0))


class Erf(torch.nn.Module):
    def forward(self, x):
        return torch.erf(x)


class Prod(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x).prod(dim=1)


def test_khronos_refuses_tract_only_ops_before_writing(tmp_path):
    with pytest.raises(NotExpressibleError) as info:
        t2n.export(Prod(), (torch.rand(2, 3),), tmp_path / "m.nnef", t2n.KhronosNNEF())
    assert "Khronos" in str(info.value)
    assert "prod" in str(info.value) and "nothing was written" in str(info.value)
    assert os.listdir(tmp_path) == []


def test_failed_save_leaves_no_partial_file(tmp_path, monkeypatch):
    art = t2n.compile(torch.nn.Linear(3, 2), (torch.rand(1, 3),))
    import t2n.artifact as mod

    def boom(*a, **k):
        raise OSError("No space left on device")
        yield b""

    monkeypatch.setattr(mod, "iter_dat", boom)
    for name in ["m", "m.tar", "m.tgz"]:
        with pytest.raises(OSError, match="No space"):
            art.save(tmp_path / name)
    assert os.listdir(tmp_path) == []


def test_bad_arguments_are_typed_errors():
    with pytest.raises(t2n.errors.InvalidArgumentError, match="names given"):
        t2n.compile(torch.nn.Linear(3, 2), (torch.rand(1, 3),), input_names=["a", "b"])
    with pytest.raises(t2n.errors.InvalidArgumentError, match="target"):
        t2n.compile(torch.nn.Linear(3, 2), (torch.rand(1, 3),), "tract")
