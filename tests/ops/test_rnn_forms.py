"""Recurrent steps in tract: the fused kernels (``tract_core_lstm_epilogue``,
``tract_core_gru_seq``) for small steps and short sequences, standard operations in the
loop from batch x hidden = ``FUSED_BELOW`` on over more than ``FUSED_STEPS`` steps, where
those kernels are slower; PyTorch's numbers both ways."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import t2n
from benchmarks.grid_models import FirstOutput
from t2n.backends.tract.emit.rnn import FUSED_BELOW, FUSED_STEPS
from t2n.errors import InvalidArgumentError

FUSED = {"lstm": "tract_core_lstm_epilogue", "gru": "tract_core_gru_seq"}


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("batch, hidden", [(1, 16), (2, 96), (8, 256), (16, 128)])
def test_the_form_follows_batch_times_hidden(cell, batch, hidden):
    torch.manual_seed(0)
    layer = {"lstm": nn.LSTM, "gru": nn.GRU}[cell](8, hidden, batch_first=True, bidirectional=True)
    x = torch.randn(batch, FUSED_STEPS + 1, 8)
    artifact = t2n.compile(FirstOutput(layer).eval(), (x,), t2n.TractNNEF.latest())
    fused = FUSED[cell] in artifact.graph_nnef
    assert fused == (batch * hidden < FUSED_BELOW)
    assert "tract_core_scan" in artifact.graph_nnef or fused
    assert artifact.check().ok


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_a_short_sequence_of_large_steps_keeps_the_fused_kernel(cell):
    """Batch 8 x hidden 256 over 8 steps: the fused kernels run even with the loop in
    standard operations there and load 4-6x faster."""
    torch.manual_seed(0)
    layer = {"lstm": nn.LSTM, "gru": nn.GRU}[cell](8, 256, batch_first=True)
    x = torch.randn(8, 8, 8)
    artifact = t2n.compile(FirstOutput(layer).eval(), (x,), t2n.TractNNEF.latest())
    assert FUSED[cell] in artifact.graph_nnef
    assert "projected = 0" in artifact.graph_nnef or cell == "lstm"
    assert artifact.check().ok


def test_a_dynamic_batch_keeps_the_fused_kernel():
    layer = nn.GRU(8, 256, batch_first=True)
    artifact = t2n.compile(FirstOutput(layer).eval(), (torch.randn(8, 5, 8),), t2n.TractNNEF.latest(),
                           dynamic_axes={"input_0": {0: "B"}})
    assert FUSED["gru"] in artifact.graph_nnef
    x = torch.randn(3, 5, 8)
    assert artifact.check(inputs=[x.numpy()], expected=[FirstOutput(layer).eval()(x).detach().numpy()]).ok


@pytest.mark.parametrize("layer, x", [
    (nn.GRU(8, 16, batch_first=True), torch.randn(4, 6, 8)),
    (nn.GRU(8, 16, num_layers=2, bidirectional=True), torch.randn(6, 3, 8)),
    (nn.GRU(8, 16, bias=False, batch_first=True, bidirectional=True), torch.randn(2, 5, 8)),
], ids=["batch first", "time major, 2 layers, both ways", "no bias"])
def test_a_small_gru_projects_its_input_in_tracts_kernel(layer, x):
    """tract 0.23.9: one ``tract_core_gru_seq`` per direction reading the input itself
    (``projected = 0``), as tract's ONNX loader builds it."""
    torch.manual_seed(0)
    artifact = t2n.compile(FirstOutput(layer).eval(), (x,), t2n.TractNNEF.latest())
    text = artifact.graph_nnef
    directions = layer.num_layers * (2 if layer.bidirectional else 1)
    assert text.count("projected = 0") == directions and "projected = 1" not in text
    assert artifact.check().ok


def test_older_tract_keeps_the_projection_outside():
    artifact = t2n.compile(FirstOutput(nn.GRU(8, 16, batch_first=True)).eval(), (torch.randn(2, 5, 8),),
                           t2n.TractNNEF("0.23.5"))
    assert "projected = 0" not in artifact.graph_nnef


def test_the_ir_op_evaluates_like_pytorch():
    from t2n.backends.tract.ops import _gru_eval
    from t2n.ir.ops.rnn import GATE_ORDER

    torch.manual_seed(0)
    gru = nn.GRU(3, 4, batch_first=True)
    x, h0 = torch.randn(2, 5, 3), torch.zeros(2, 4)
    order = [k for g in GATE_ORDER["gru"] for k in range(g * 4, (g + 1) * 4)]
    w_ih, w_hh = gru.weight_ih_l0.detach()[order], gru.weight_hh_l0.detach()[order]
    b = torch.cat([gru.bias_ih_l0.detach()[order], gru.bias_hh_l0.detach()[order]])
    y, h = _gru_eval([x.numpy(), w_ih.numpy(), w_hh.numpy(), h0.numpy(), b.numpy()], {"hidden": 4})
    want = gru(x)[0].detach().numpy()
    assert abs(y - want).max() < 1e-5 and abs(h - want[:, -1]).max() < 1e-5


@pytest.mark.parametrize("kernels, batch, hidden", [("fused", 8, 256), ("loop", 1, 16)])
def test_recurrent_kernels_overrides_the_rule(kernels, batch, hidden):
    """``TractNNEF(recurrent_kernels=...)``: the fused kernels where the rule writes the
    loop (a faster load), the loop where the rule keeps the kernels; PyTorch's numbers."""
    torch.manual_seed(0)
    for cell in ("lstm", "gru"):
        layer = {"lstm": nn.LSTM, "gru": nn.GRU}[cell](8, hidden, batch_first=True, bidirectional=True)
        x = torch.randn(batch, FUSED_STEPS + 1, 8)
        artifact = t2n.compile(FirstOutput(layer).eval(), (x,), t2n.TractNNEF.latest(recurrent_kernels=kernels))
        assert (FUSED[cell] in artifact.graph_nnef) == (kernels == "fused")
        assert ("tract_core_scan" in artifact.graph_nnef) == (kernels == "loop" or cell == "lstm")
        assert artifact.check().ok


def test_recurrent_kernels_is_checked():
    with pytest.raises(InvalidArgumentError, match="recurrent_kernels"):
        t2n.TractNNEF.latest(recurrent_kernels="fast")
