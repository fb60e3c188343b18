"""What each target refuses is a checked table: every IR op (the built-in ones and the
target's own) has an emitter for the target or a declared refusal with its reason, and
a refusal never names an op the target does express."""

from __future__ import annotations

import pytest
import torch

import t2n
from t2n.backends.tract.ops import TRACT_FORMS
from t2n.errors import NotExpressibleError
from t2n.ir import OpSet

TARGETS = {"tract": (t2n.TractNNEF(), TRACT_FORMS.schemas), "khronos": (t2n.KhronosNNEF(), {})}
RENDERED_BY_THE_RENDERER = {"const"}
"""IR ops the renderer writes itself (constants become literals or .dat variables)."""


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_every_ir_op_has_an_emitter_or_a_declared_refusal(name):
    target, own_ops = TARGETS[name]
    ops = (set(OpSet.default().names()) | set(own_ops)) - RENDERED_BY_THE_RENDERER
    emitters, refusals = set(target.emitter_table()), dict(target.refusals())
    assert sorted(ops - emitters - set(refusals)) == [], f"IR ops {name} neither emits nor refuses"
    assert sorted(set(refusals) & emitters) == [], f"{name} refuses ops it has emitters for"
    assert sorted(set(refusals) - ops) == [], f"{name} refuses ops that do not exist"
    assert all(isinstance(why, str) and why for why in refusals.values())


def test_a_refusal_says_why():
    class Top2(torch.nn.Module):
        def forward(self, x):
            return torch.topk(x, 2).values

    with pytest.raises(NotExpressibleError) as err:
        t2n.compile(Top2(), (torch.randn(3, 5),), t2n.KhronosNNEF())
    assert "IR op 'topk' has no Khronos NNEF form: standard NNEF has no top-k" in str(err.value)
