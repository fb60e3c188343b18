"""The export frontend on models with buffers, constants, nested and keyword inputs,
state writes, half precision and tied weights: each runs in tract (or the Khronos
interpreter) against PyTorch, with the tensor names the jit frontend gives."""

import numpy as np
import pytest
import torch
from export_models import Counter, KeywordOnly, Nested, Tied, WithConstants, convnet
from torch import nn

import t2n


def _dat_names(art):
    return sorted(t.path for t in art.rendered.tensors)


def test_batch_norm_buffers_are_variables_named_as_with_jit():
    m, x = convnet(), torch.randn(1, 3, 8, 8)
    art = t2n.compile(m, (x,), frontend="export", fold_batch_norm=False)
    assert art.check().ok
    names = _dat_names(art)
    assert "0.weight.dat" in names and "5.bias.dat" in names
    assert names == _dat_names(t2n.compile(m, (x,), fold_batch_norm=False))


def test_lifted_tensor_constants_match_pytorch_and_jit_names(tmp_path):
    m, x = WithConstants(), torch.randn(2, 4)
    art = t2n.compile(m, (x,), frontend="export", dump_ir=tmp_path)
    assert art.check().ok
    assert _dat_names(art) == _dat_names(t2n.compile(m, (x,)))
    lowered = (tmp_path / "000-lowered.ir").read_text()
    assert lowered.count("= const()") == 2  # constants of the graph (folded like jit's), not weights
    assert 'label="lin.weight"' in lowered


def test_tied_weight_is_one_variable_under_its_first_name():
    m, ids = Tied(), torch.randint(0, 10, (1, 5))
    art = t2n.compile(m, (ids,), frontend="export")
    assert art.check().ok
    assert _dat_names(art) == _dat_names(t2n.compile(m, (ids,)))
    assert "emb.weight.dat" in _dat_names(art) and "head.weight.dat" not in _dat_names(art)


def test_nested_inputs_and_outputs_are_flattened_and_named_as_with_jit():
    m = Nested()
    args = ({"a": torch.randn(2, 4), "b": torch.randn(3)}, (torch.randn(2, 4), torch.randn(2, 4)))
    art = t2n.compile(m, args, frontend="export")
    assert art.check().ok
    assert art.input_names == ["input_0_a", "input_0_b", "input_1_0", "input_1_1"]
    assert art.output_names == ["sum", "parts_0", "parts_1"]
    jit = t2n.compile(m, args)
    assert (jit.input_names, jit.output_names) == (art.input_names, art.output_names)


def test_keyword_arguments_become_named_inputs():
    kwargs = {"mask": torch.rand(2, 4) > 0.5, "bias": torch.randn(4)}
    art = t2n.compile(KeywordOnly(), (torch.randn(2, 4),), kwargs=kwargs, frontend="export")
    assert art.check().ok
    assert art.input_names == ["input_0", "mask", "bias"]


def test_buffer_written_in_forward_is_computed_as_pytorch_ran_the_call():
    m = Counter()
    art = t2n.compile(m, (torch.ones(2, 4),), frontend="export")
    # one call, as for jit: the written buffer is read after the write, from its value before the call
    assert torch.equal(m.count, torch.ones(4))
    assert art.check().ok
    np.testing.assert_array_equal(art.reference_outputs[0], np.ones((2, 4), np.float32))
    assert art.output_names == ["output_0"]  # the written buffer is not an output


def test_exported_program_given_directly():
    m, x = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8)), torch.randn(2, 4)
    program = torch.export.export(m, (x,))
    art = t2n.compile(program, (x,), frontend="export")
    assert art.check().ok
    assert _dat_names(art) == _dat_names(t2n.compile(m, (x,)))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_models(dtype):
    m = nn.Sequential(nn.Linear(4, 8), nn.SiLU(), nn.LayerNorm(8)).to(dtype)
    art = t2n.compile(m, (torch.randn(2, 4).to(dtype),), frontend="export")
    assert art.check("loose").ok
    assert art.ir.inputs[0].type.dtype.name in ("F16", "BF16")


def test_khronos_target_runs_in_the_interpreter():
    art = t2n.compile(convnet(), (torch.randn(1, 3, 8, 8),), t2n.KhronosNNEF(), frontend="export")
    assert art.check().ok


def test_export_writes_the_same_archive_members_as_jit(tmp_path):
    m, x = convnet(), torch.randn(1, 3, 8, 8)
    a = t2n.export(m, (x,), tmp_path / "e.nnef", frontend="export", check_io=True)
    b = t2n.export(m, (x,), tmp_path / "j.nnef")
    assert sorted(p.name for p in (tmp_path / "e.nnef").iterdir()) == sorted(p.name for p in (tmp_path / "j.nnef").iterdir())
    assert a.stats["bytes_written"] == b.stats["bytes_written"]


class _Pad(nn.Module):
    def forward(self, x):
        return nn.functional.pad(x, (1, 2), mode="reflect")


@pytest.mark.parametrize("model, shape, kind", [
    (nn.LSTM(4, 6, batch_first=True, bidirectional=True), (2, 5, 4), "aten::lstm"),
    (nn.GRU(4, 5, num_layers=2), (5, 2, 4), "aten::gru"),
    (nn.RMSNorm(6), (2, 3, 6), "aten::rms_norm"),
    (_Pad(), (1, 3, 7), "aten::pad"),
    (nn.Sequential(nn.Unfold(2), nn.Fold((4, 4), 2)), (1, 2, 4, 4), "aten::col2im"),
], ids=["lstm", "gru", "rms_norm", "reflect_pad", "unfold_fold"])
def test_kept_ops_are_lowered_whole(model, shape, kind):
    art = t2n.compile(model.eval(), (torch.randn(*shape),), frontend="export")
    assert art.check().ok
    assert kind in art.ir.info.aten_ops
