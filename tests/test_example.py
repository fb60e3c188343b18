"""The issue's example end to end, on both targets and all archive forms."""

import hashlib
import tarfile

import pytest
import torch

import t2n
from t2n.errors import CheckMismatchError


def example_model():
    return torch.nn.Sequential(
        torch.nn.Conv1d(10, 20, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(20 * 98, 5)
    ).eval()


@pytest.mark.parametrize("suffix", ["", ".tar", ".tgz"])
def test_example_tract_every_form(tmp_path, suffix):
    art = t2n.compile(example_model(), (torch.rand(1, 10, 100),), t2n.TractNNEF("0.23.9"),
                      input_names=["inp"], output_names=["out"])
    path = art.save(tmp_path / f"model.nnef{suffix}")
    assert path.exists()
    report = art.check()
    assert report.ok and report.outputs[0].name == "out"
    assert "graph main(inp) -> (out)" in art.graph_nnef
    assert "conv(" in str(art.ir)


def test_example_khronos(tmp_path):
    art = t2n.compile(example_model(), (torch.rand(1, 10, 100),), t2n.KhronosNNEF("1.0.5"))
    art.save(tmp_path / "model.nnef.tgz")
    assert art.check().ok
    assert "tract" not in art.graph_nnef


def test_two_exports_are_byte_identical(tmp_path):
    model = example_model()
    x = torch.rand(1, 10, 100)
    digests = []
    for i in range(2):
        art = t2n.compile(model, (x,), t2n.TractNNEF())
        p = art.save(tmp_path / f"m{i}.tgz")
        digests.append(hashlib.sha256(p.read_bytes()).hexdigest())
    assert digests[0] == digests[1]
    with tarfile.open(tmp_path / "m0.tgz") as tar:
        for m in tar.getmembers():
            assert m.mtime == 0 and m.uid == 0 and m.uname == "" and m.gname == ""


def test_check_reports_a_wrong_reference(tmp_path):
    art = t2n.compile(example_model(), (torch.rand(1, 10, 100),))
    wrong = [art.reference_outputs[0] + 1.0]
    with pytest.raises(CheckMismatchError) as info:
        art.check(inputs=art.example_inputs, expected=wrong, debug_dir=tmp_path / "dbg")
    assert "max abs err" in str(info.value)
    assert (tmp_path / "dbg" / "ir.txt").exists()
    assert (tmp_path / "dbg" / "report.txt").read_text().count("FAIL") == 1


def test_check_io_option():
    art = t2n.compile(example_model(), (torch.rand(1, 10, 100),), check_io=True)
    assert art.reference_outputs[0].shape == (1, 5)


def test_check_io_refuses_a_wrong_artifact():
    """A rule that lowers ReLU wrongly: compile succeeds without check_io and raises with it."""
    wrong = t2n.RuleSet("wrong")

    @wrong.rule("aten::relu")
    def _negated(ctx):
        x = ctx.tensor(0)
        return ctx.b.op("mul", x, ctx.as_value(-1.0, x.type.dtype))

    registry = t2n.LoweringRegistry.default().extended(wrong, override=True)
    x = torch.rand(1, 10, 100)
    t2n.compile(example_model(), (x,), registry=registry)
    with pytest.raises(CheckMismatchError, match="max abs err"):
        t2n.compile(example_model(), (x,), registry=registry, check_io=True)
