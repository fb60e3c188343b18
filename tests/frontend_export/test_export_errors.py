"""Bad inputs to the export frontend: each is refused with a typed error that names
the thing and says what to do, and nothing is written."""

import pytest
import torch
from export_models import ThreeUnsupported
from torch import nn

import t2n
from t2n.errors import InvalidArgumentError, TraceError, UnsupportedOpsError


@pytest.mark.parametrize("frontend", ["fx", "", None, 1, "JIT"])
def test_unknown_frontend(frontend):
    with pytest.raises(InvalidArgumentError, match=r"frontend must be one of 'jit', 'export', got"):
        t2n.compile(nn.ReLU(), (torch.randn(2),), frontend=frontend)


def test_script_module_needs_the_jit_frontend():
    scripted = torch.jit.script(nn.Linear(2, 2))
    with pytest.raises(InvalidArgumentError, match=r'RecursiveScriptModule.*frontend="jit"'):
        t2n.compile(scripted, (torch.randn(1, 2),), frontend="export")


def test_extractors_need_the_jit_frontend():
    ex = t2n.ModuleExtractor(nn.ReLU, lower=lambda ctx, module, x: x)
    with pytest.raises(InvalidArgumentError, match=r'extractors= apply to the jit frontend.*frontend="jit"'):
        t2n.compile(nn.Sequential(nn.ReLU()), (torch.randn(2),), frontend="export", extractors=[ex])


def test_exported_program_needs_the_export_frontend():
    program = torch.export.export(nn.ReLU(), (torch.randn(2),))
    with pytest.raises(InvalidArgumentError, match=r'ExportedProgram.*pass frontend="export"'):
        t2n.compile(program, (torch.randn(2),))


def test_exported_program_with_weights_from():
    m = nn.Linear(2, 2)
    program = torch.export.export(m, (torch.randn(1, 2),))
    with pytest.raises(InvalidArgumentError, match="weights_from is for nn.Module models"):
        t2n.compile(program, (torch.randn(1, 2),), frontend="export", weights_from=m.state_dict())


def test_a_function_is_not_a_model():
    with pytest.raises(InvalidArgumentError, match="model must be a torch.nn.Module or a torch.export.ExportedProgram"):
        t2n.compile(torch.relu, (torch.randn(2),), frontend="export")


def test_arguments_without_a_tensor():
    with pytest.raises(InvalidArgumentError, match="contain no tensor"):
        t2n.compile(nn.Identity(), (3,), frontend="export")


def test_every_unsupported_op_is_listed_with_module_path_op_and_line(tmp_path):
    out = tmp_path / "m.nnef"
    with pytest.raises(UnsupportedOpsError) as info:
        t2n.export(ThreeUnsupported(), (torch.randn(2, 8),), out, frontend="export")
    text = str(info.value)
    assert "3 op use(s)" in text
    assert "aten::special_bessel_j0 in module 'enc.1'" in text
    assert "aten::special_airy_ai in module 'dec'" in text
    assert "aten::special_i0e in the top-level module" in text
    assert "export_models.py(" in text and "register a lowering rule" in text
    assert len(info.value.problems) == 3
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_what_torch_export_refuses_is_a_trace_error_suggesting_jit():
    class DataDependent(nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x - 1

    with pytest.raises(TraceError, match=r'(?s)torch.export cannot export this model: data-dependent Python.*frontend="jit"'):
        t2n.compile(DataDependent(), (torch.randn(4),), frontend="export")


@pytest.mark.parametrize("args, what", [
    ((torch.randn(3, 4),), "Guard failed"),
    ((torch.randn(2, 4), torch.randn(2, 4)), "tree spec"),
], ids=["other_size", "extra_argument"])
def test_inputs_that_do_not_fit_a_given_exported_program(args, what, tmp_path):
    program = torch.export.export(nn.Linear(4, 2), (torch.randn(2, 4),))
    with pytest.raises(InvalidArgumentError, match=rf"(?s)do not fit the ExportedProgram.*{what}.*pass the arguments"):
        t2n.export(program, args, tmp_path / "m.nnef", frontend="export")
    assert list(tmp_path.iterdir()) == []
