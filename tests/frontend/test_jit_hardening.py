"""TorchScript models: hardening for the example inputs, then export checked in tract."""

import subprocess
import sys
import textwrap

import pytest
import torch

import t2n


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.lin(x))


class Scripted(torch.nn.Module):
    use_block: bool

    def __init__(self):
        super().__init__()
        self.block = Block()
        self.use_block = True

    def forward(self, x, mask: torch.Tensor | None = None, scale: float = 2.0):
        assert x.dim() == 2, "expects a matrix"
        y = self.block(x) if self.use_block else x
        for i in range(3):                      # constant range: unrolled
            y = y + float(i)
        if x.size(0) > 1:                       # size decides control flow
            y = y * scale
        if bool(x.mean() > 0.0):                # data decides: the example's branch
            y = y - 1.0
        else:
            y = y + 1.0
        i = 0
        while i < x.size(0):                    # loop bounded by a size
            y = y + 0.5
            i += 1
        if mask is not None:
            y = y * mask
        return y, (x.sum(), y.shape[0])


@pytest.fixture(scope="module")
def scripted():
    return torch.jit.script(Scripted().eval())


def test_hardening_reports_each_step_and_exports(scripted):
    diag = {}
    x = torch.randn(3, 4)
    art = t2n.compile(scripted, (x,), jit_diagnostics=diag, verify_ir=True)
    assert diag["froze"] is True
    for step in ("specialize_inputs", "fold_constant_scalar_arithmetic", "fold_constant_ifs",
                 "strip_assertion_ifs", "replace_size_calls_with_constants", "fold_data_dependent_ifs"):
        assert diag[step] >= 1, (step, diag)
    assert art.check().ok
    assert sorted(art.tensor_files) == ["block.lin.bias.dat", "block.lin.weight.dat"]


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_optional_argument_given_and_data_branch(scripted, sign):
    x = torch.rand(2, 4) * sign
    art = t2n.compile(scripted, (x, torch.rand(2, 4), 3.0))
    assert art.check().ok


def test_harden_without_freezing_keeps_the_callers_module(scripted):
    diag = {}
    x = torch.randn(3, 4)
    hardened = t2n.harden_jit_for_export(scripted, (x,), freeze=False, diagnostics=diag)
    assert diag["froze"] is False
    assert "prim::If" not in str(hardened.graph)
    torch.testing.assert_close(hardened(x)[0], scripted(x)[0])
    scripted(torch.randn(5, 4), torch.rand(5, 4))  # the original still runs, any size, any args
    art = t2n.compile(hardened, (x,))
    assert art.check().ok


def test_freeze_failure_falls_back_to_inlining(scripted, monkeypatch):
    def refuse(*a, **k):
        raise RuntimeError("freezing is not possible here")

    monkeypatch.setattr(torch.jit, "freeze", refuse)
    diag = {}
    art = t2n.compile(scripted, (torch.randn(3, 4),), jit_diagnostics=diag)
    assert diag["froze"] is False and "freezing is not possible" in diag["freeze_error"]
    assert diag["inline_submodule_calls"] >= 1
    assert art.check().ok


def test_tuple_argument_is_flattened():
    class Pair(torch.nn.Module):
        def forward(self, xy: tuple[torch.Tensor, torch.Tensor], z):
            a, b = xy
            return a * b + z

    m = torch.jit.script(Pair())
    art = t2n.compile(m, ((torch.rand(3), torch.rand(3)), torch.rand(3)))
    assert art.check().ok


def test_jit_only_artifact_exports_in_a_process_without_its_class(tmp_path, scripted):
    path = tmp_path / "model.pt"
    torch.jit.save(scripted, str(path))
    code = textwrap.dedent(f"""
        import torch, t2n
        m = torch.jit.load({str(path)!r})
        assert type(m).__name__ == "RecursiveScriptModule"
        art = t2n.compile(m, (torch.randn(4, 4),))
        art.save({str(tmp_path / "out.nnef.tgz")!r})
        print(art.check())
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "all outputs match" in out.stdout
    assert (tmp_path / "out.nnef.tgz").exists()
