"""``torch.library`` custom ops: one traced node, lowered by a rule the user passes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import t2n
from t2n.errors import UnsupportedOpsError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import custom_torch_op as example


def test_example_runs_in_tract():
    assert example.main().ok


def test_custom_op_is_one_node_lowered_by_the_rule():
    calls = []

    def counted(ctx):
        calls.append(ctx.kind)
        return example.lower_soft_clip(ctx)

    registry = t2n.LoweringRegistry.default().extended({"mylib::soft_clip": counted})
    art = t2n.compile(example.Model(), (torch.randn(3, 6),), registry=registry)
    assert calls == ["mylib::soft_clip"]  # one node, its Python body not traced
    kinds = [op.kind for op in art.ir.ops()]
    assert "tanh" in kinds and "div" in kinds
    assert art.check().ok


def test_without_the_rule_the_op_is_named_and_nothing_written(tmp_path):
    target = tmp_path / "model.nnef.tgz"
    with pytest.raises(UnsupportedOpsError) as info:
        t2n.export(example.Model(), (torch.randn(3, 6),), target)
    text = str(info.value)
    assert "mylib::soft_clip" in text and "no lowering rule" in text and "registry=" in text
    assert "custom_torch_op.py" in text  # the source line of the call
    assert not target.exists() and not list(tmp_path.iterdir())


def test_rule_is_per_call():
    t2n.compile(example.Model(), (torch.randn(3, 6),), registry=example.registry())
    assert "mylib::soft_clip" not in t2n.LoweringRegistry.default()
