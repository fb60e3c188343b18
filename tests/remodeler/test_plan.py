"""Remodel plans in the other exporter's shape-config format, from YAML or JSON, for one
graph or several sub-networks; every malformed key is refused by name."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from t2n.errors import InvalidArgumentError, RemodelPlanError
from t2n.remodel import GraphPlan, InputPlan, OutputPlan, RemodelPlan, as_plan

NEMO_STYLE = """\
encoder:
  inputs:
    audio_signal:
      original_shape: [B, 80, T]
      collapse_dims: [B]
    length:
      original_shape: [B]
      collapse_dims: [0]
      bind_scalar_to_dim_size: encoder.audio_signal.T
  outputs:
    outputs:
      collapse_dims: [0]
  renamed_symbols:
    FRAMES: [T]
  extensions:
    - tract_assert FRAMES <= 6000
decoder:
  inputs:
    targets:
      original_shape: [1, U]
      eval_symbols: {U: 1}
  outputs_keep: [logits]
"""


def test_a_multi_graph_yaml_plan(tmp_path: Path) -> None:
    (tmp_path / "shapes.yaml").write_text(NEMO_STYLE)
    plan = RemodelPlan.load(tmp_path / "shapes.yaml")
    assert plan.names == ["encoder", "decoder"]
    enc = plan["encoder"]
    assert enc.inputs["audio_signal"] == InputPlan(("B", 80, "T"), ("B",))
    assert enc.inputs["length"].bind_scalar_to_dim_size == ("encoder.audio_signal", "T")
    assert enc.outputs == {"outputs": OutputPlan((0,))}
    assert enc.renamed_symbols == {"FRAMES": ("T",)} and enc.extensions == ("tract_assert FRAMES <= 6000",)
    assert plan.graph("decoder").eval_symbols == {"U": 1} and plan.graph("decoder").outputs_keep == ("logits",)
    with pytest.raises(RemodelPlanError, match="several sub-networks"):
        plan.graph()
    with pytest.raises(RemodelPlanError, match="no sub-network 'joint'"):
        plan.graph("joint")


def test_one_graph_json_plan(tmp_path: Path) -> None:
    (tmp_path / "plan.json").write_text(json.dumps({"inputs": {"x": {"collapse_dims": [0, "S"]}},
                                                    "renamed_symbols": {"frames": "S"}}))
    plan = as_plan(tmp_path / "plan.json")
    gp = plan.graph("anything")
    assert isinstance(gp, GraphPlan) and gp.inputs["x"].collapse_dims == (0, "S")
    assert gp.renamed_symbols == {"frames": ("S",)}


@pytest.mark.parametrize("data, key, message", [
    ({"inputs": {}, "outputs_kept": []}, "outputs_kept", "unknown key"),
    ({"inputs": {"x": {"collapse": [0]}}}, "inputs.x.collapse", "unknown key"),
    ({"enc": {"inputs": {"x": {"collapse_dims": [0.5]}}}}, "enc.inputs.x.collapse_dims[0]", "an axis is an int"),
    ({"inputs": {"x": {"bind_scalar_to_dim_size": 3}}}, "inputs.x.bind_scalar_to_dim_size", "'<input>.<axis>'"),
    ({"inputs": {"x": {"bind_scalar_to_dim_size": "y.2-"}}}, "inputs.x.bind_scalar_to_dim_size", "neither"),
    ({"inputs": {"x": {"eval_symbols": {"T": 0}}}}, "inputs.x.eval_symbols.T", "positive int"),
    ({"inputs": {"x": {"original_shape": [1, -2]}}}, "inputs.x.original_shape[1]", "non-negative int"),
    ({"outputs": {"y": {"collapse_dims": [0], "squeeze": 1}}}, "outputs.y.squeeze", "unknown key"),
    ({"renamed_symbols": {"F": ["T"], "G": ["T"]}}, "renamed_symbols.G", "already renamed to F"),
    ({"outputs_keep": "logits"}, "outputs_keep", "a list of names"),
    ({"outputs_keep": []}, "outputs_keep", "keeps no output"),
    ({"extensions": ["tract_assert S >= 1; drop"]}, "extensions", "contains a ';'"),
    ({"inputs": ["x"]}, "inputs", "must be a mapping"),
    ([1, 2], "", "a plan is a mapping"),
])
def test_malformed_plans_name_the_key(data: object, key: str, message: str) -> None:
    with pytest.raises(RemodelPlanError, match=message) as err:
        RemodelPlan.from_mapping(data)
    assert err.value.key == key


def test_plan_files_must_say_their_format(tmp_path: Path) -> None:
    (tmp_path / "plan.txt").write_text("{}")
    with pytest.raises(RemodelPlanError, match="ends in .yaml, .yml or .json"):
        RemodelPlan.load(tmp_path / "plan.txt")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(RemodelPlanError, match="is not JSON"):
        RemodelPlan.load(tmp_path / "bad.json")


def test_yaml_without_pyyaml_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plan.yaml").write_text("inputs: {}\n")
    monkeypatch.setitem(sys.modules, "yaml", None)
    with pytest.raises(InvalidArgumentError, match=r"pip install 't2n\[remodel\]'.*or write the plan as JSON"):
        RemodelPlan.load(tmp_path / "plan.yaml")
