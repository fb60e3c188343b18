"""``compile(..., remodel=plan)``: the artifact has the plan's interface, and ``check``
compares it with PyTorch on inputs reshaped to match, at several sizes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import t2n
from t2n.errors import RemodelPlanError


class Conv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(4, 8, 3, padding=1)

    def forward(self, x: torch.Tensor, length: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.conv(x)
        return y.mean(-1) * length, y.softmax(1)


PLAN = {"inputs": {"x": {"original_shape": [1, 4, "T"], "collapse_dims": [0]},
                   "length": {"bind_scalar_to_dim_size": "x.T"}},
        "outputs": {"probs": {"collapse_dims": [0]}},
        "renamed_symbols": {"frames": ["T"]},
        "outputs_keep": ["probs", "mean"],
        "extensions": ["tract_assert frames <= 4096"]}


def test_the_artifact_has_the_plans_interface_and_matches_pytorch() -> None:
    torch.manual_seed(0)
    model = Conv().eval()
    art = t2n.compile(model, (torch.randn(1, 4, 10), torch.tensor(10.0)), input_names=["x", "length"],
                      output_names=["mean", "probs"], remodel=PLAN, check_io=True, verify_ir=True)
    assert art.input_names == ["x"] and art.output_names == ["probs", "mean"]
    assert [e.shape for e in art.example_inputs] == [(4, 10)]
    assert [r.shape for r in art.reference_outputs] == [(8, 10), (1, 8)]
    assert "x = external<scalar>(shape = [4, frames]);" in art.graph_nnef
    assert "extension tract_assert frames <= 4096;" in art.graph_nnef
    assert art.stats["remodel"]["bind-scalar-to-dim-size.bound"] == 1
    for t in (1, 5, 17):
        x = torch.randn(1, 4, t)
        mean, probs = (o.detach().numpy() for o in model(x, torch.tensor(float(t))))
        art.check(inputs=[x[0].numpy()], expected=[probs[0], mean])


class Step(nn.Module):
    """One decoding step: ``targets[1, U]`` (U fixed to 1 by the plan)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 6)

    def forward(self, targets: torch.Tensor) -> torch.Tensor:
        return self.emb(targets).cumsum(1)


def test_eval_symbols_sizes_the_example_inputs(tmp_path: Path) -> None:
    plan = {"inputs": {"targets": {"original_shape": [1, "U"], "eval_symbols": {"U": 1}}}}
    art = t2n.compile(Step().eval(), (torch.tensor([[1, 2, 3, 4]]),), input_names=["targets"], remodel=plan,
                      check_io=True)
    assert art.example_inputs[0].shape == (1, 1)
    assert "targets = external<integer>(shape = [1, 1]);" in art.graph_nnef
    assert "tract_symbol" not in art.graph_nnef


def test_original_shape_symbols_are_dynamic_axes() -> None:
    model = Conv().eval()
    art = t2n.compile(model, (torch.randn(1, 4, 6), torch.tensor(6.0)), input_names=["x", "length"],
                      remodel={"inputs": {"x": {"original_shape": [1, 4, "T"]}}})
    assert "x = external<scalar>(shape = [1, 4, T]);" in art.graph_nnef
    x = torch.randn(1, 4, 3)
    art.check(inputs=[x.numpy(), np.array(3.0, np.float32)],
              expected=[o.detach().numpy() for o in model(x, torch.tensor(3.0))])


@pytest.mark.parametrize("kwargs, plan, key, message", [
    ({"dynamic_axes": {"x": {2: "S"}}}, {"inputs": {"x": {"original_shape": [1, 4, "T"]}}},
     "inputs.x.original_shape[2]", "T here but S in dynamic_axes"),
    ({}, {"inputs": {"length": {"bind_scalar_to_dim_size": "x.2"}}}, "inputs.length.bind_scalar_to_dim_size",
     "the example input 'length' is 7.0 but axis 2 of 'x' is 10"),
    ({}, {"enc": {}, "dec": {}}, "", "pass remodel=plan\\['enc'\\]"),
    ({"target": t2n.KhronosNNEF()}, {"inputs": {"x": {"original_shape": [1, 4, "T"]}}}, "inputs",
     "no symbolic dimensions"),
])
def test_plans_that_do_not_fit_name_the_key(kwargs: dict[str, object], plan: dict[str, object], key: str,
                                             message: str) -> None:
    target = kwargs.pop("target", None)
    with pytest.raises(RemodelPlanError, match=message) as err:
        t2n.compile(Conv().eval(), (torch.randn(1, 4, 10), torch.tensor(7.0)), target, input_names=["x", "length"],
                    remodel=plan, **kwargs)  # type: ignore[arg-type]
    assert err.value.key == key


def test_export_takes_the_plan_from_a_file(tmp_path: Path) -> None:
    import json

    (tmp_path / "plan.json").write_text(json.dumps({"inputs": {"x": {"collapse_dims": [0]}}}))
    art = t2n.export(Conv().eval(), (torch.randn(1, 4, 5), torch.tensor(5.0)), tmp_path / "m.nnef.tgz",
                     input_names=["x", "length"], remodel=tmp_path / "plan.json", check_io=True)
    assert t2n.read(tmp_path / "m.nnef.tgz").interface().inputs[0].shape == (4, 5)
    assert art.input_names == ["x", "length"]
