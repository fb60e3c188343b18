"""The export frontend through every entry point: ``t2n.export``, the drop-in
``export_model_to_nnef(frontend=...)`` and ``t2n export --frontend``; and the kept-ops
list that decides what is not decomposed."""

import textwrap

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from export_models import convnet
from torch import nn

import t2n
from t2n.cli.main import cli as cli_main
from t2n.errors import InvalidArgumentError
from t2n.frontend.export.kept_ops import KEPT_OPS, decomposition_table, kind_of
from t2n.frontend.registry import LoweringRegistry


def test_every_kept_op_has_a_rule_and_stays_out_of_the_decompositions():
    table = decomposition_table()
    registry = LoweringRegistry.default()
    for op in KEPT_OPS:
        assert kind_of(op) in registry, kind_of(op)
        assert op not in table, op


def test_kind_drops_the_overload_name():
    assert kind_of(torch.ops.aten.relu.default) == "aten::relu"
    assert kind_of(torch.ops.aten.upsample_nearest2d.vec) == "aten::upsample_nearest2d"


def test_dropin_export_with_the_export_frontend(tmp_path):
    path = t2n.export_model_to_nnef(convnet(), torch.randn(1, 3, 8, 8), tmp_path / "m.nnef",
                                    t2n.TractNNEF(), frontend="export")
    assert path.is_file() and path.name == "m.nnef.tar"  # checked in tract by the call


def test_dropin_refuses_an_unknown_frontend_before_writing(tmp_path):
    with pytest.raises(InvalidArgumentError, match="frontend must be one of"):
        t2n.export_model_to_nnef(convnet(), torch.randn(1, 3, 8, 8), tmp_path / "m.nnef",
                                 t2n.TractNNEF(), frontend="onnx")
    assert list(tmp_path.iterdir()) == []


def test_cli_export_frontend(tmp_path, monkeypatch):
    (tmp_path / "fmodels.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn

        def build():
            torch.manual_seed(0)
            return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)), (torch.randn(3, 4),)
    """))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "m.nnef"
    res = CliRunner().invoke(cli_main, ["export", "fmodels:build", "-o", str(out), "--frontend", "export",
                                        "--check", "--json"])
    assert res.exit_code == 0, res.output
    assert '"ok": true' in res.output and (out / "graph.nnef").is_file()
    res = CliRunner().invoke(cli_main, ["export", "fmodels:build", "-o", str(tmp_path / "x.nnef"),
                                        "--frontend", "fx"])
    assert res.exit_code == 2 and "'fx' is not one of 'jit', 'export'" in res.output
    assert not (tmp_path / "x.nnef").exists()


def test_same_graph_outputs_as_jit_on_a_second_input():
    m, x = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 3)), torch.randn(2, 4)
    art = t2n.compile(m, (x,), frontend="export")
    x2 = torch.randn(2, 4)
    with torch.no_grad():
        ref = m(x2).numpy()
    report = art.check(inputs=[x2.numpy()], expected=[ref])
    assert report.ok and np.isfinite(report.max_abs)
