import importlib.util
from pathlib import Path

import torch

import t2n

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_pass.py"


def load_example():
    spec = importlib.util.spec_from_file_location("custom_pass", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_documented_custom_pass_runs_through_compile():
    ex = load_example()
    art = t2n.compile(ex.Swish(), (torch.randn(3, 8),), passes=[ex.FuseSiLU()], verify_ir=True)
    kinds = [op.kind for op in art.ir.ops()]
    assert "silu" in kinds and "sigmoid" not in kinds and "mul" not in kinds
    assert art.stats["pass_stats"]["fuse-silu.fused"] == 1
    assert "tract_core_silu" in art.graph_nnef
    assert art.check().ok
    kh = t2n.compile(ex.Swish(), (torch.randn(3, 8),), t2n.KhronosNNEF(), passes=[ex.FuseSiLU()])
    assert kh.check().ok


def test_example_main_places_the_pass_by_name_and_runs_in_tract(capsys):
    art = load_example().main()
    assert art.stats["pass_stats"]["fuse-silu.fused"] == 1
    assert [op.kind for op in art.ir.ops() if op.kind in ("silu", "sigmoid", "mul")] == ["silu"]
    assert art.check().ok
    assert "fuse-silu.fused" in capsys.readouterr().out
