"""Recurrent steps in tract: the fused kernels (``tract_core_lstm_epilogue``,
``tract_core_gru_seq``) for small steps, standard operations in the loop from batch x
hidden = ``FUSED_BELOW`` on, where those kernels are slower; PyTorch's numbers both ways."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import t2n
from t2n.backends.nnef.emit.rnn import FUSED_BELOW


class First(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.inner(x)[0]
        return out


FUSED = {"lstm": "tract_core_lstm_epilogue", "gru": "tract_core_gru_seq"}


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("batch, hidden", [(1, 16), (2, 96), (8, 256), (16, 128)])
def test_the_form_follows_batch_times_hidden(cell, batch, hidden):
    torch.manual_seed(0)
    layer = {"lstm": nn.LSTM, "gru": nn.GRU}[cell](8, hidden, batch_first=True, bidirectional=True)
    x = torch.randn(batch, 5, 8)
    artifact = t2n.compile(First(layer).eval(), (x,), t2n.TractNNEF.latest())
    fused = FUSED[cell] in artifact.graph_nnef
    assert fused == (batch * hidden < FUSED_BELOW)
    assert "tract_core_scan" in artifact.graph_nnef or fused
    assert artifact.check().ok


def test_a_dynamic_batch_keeps_the_fused_kernel():
    layer = nn.GRU(8, 256, batch_first=True)
    artifact = t2n.compile(First(layer).eval(), (torch.randn(8, 5, 8),), t2n.TractNNEF.latest(),
                           dynamic_axes={"input_0": {0: "B"}})
    assert FUSED["gru"] in artifact.graph_nnef
    x = torch.randn(3, 5, 8)
    assert artifact.check(inputs=[x.numpy()], expected=[First(layer).eval()(x).detach().numpy()]).ok
