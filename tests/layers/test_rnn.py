"""LSTM, GRU and RNN layers and cells: a scan loop in tract, unrolled in Khronos NNEF."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import t2n
from t2n.testing import check_dynamic, check_export


class WithState(nn.Module):
    def __init__(self, rnn: nn.Module) -> None:
        super().__init__()
        self.rnn = rnn

    def forward(self, x, *state):
        if not state:
            return self.rnn(x)
        return self.rnn(x, state if len(state) > 1 else state[0])


@pytest.mark.parametrize("rnn", [
    nn.LSTM(4, 6),
    nn.LSTM(4, 6, num_layers=2, batch_first=True),
    nn.LSTM(4, 6, bidirectional=True),
    nn.LSTM(4, 6, num_layers=2, bidirectional=True, batch_first=True, bias=False),
    nn.LSTM(4, 6, proj_size=3),
    nn.GRU(4, 5),
    nn.GRU(4, 5, num_layers=2, bidirectional=True, batch_first=True),
    nn.GRU(4, 5, bias=False),
    nn.RNN(4, 5),
    nn.RNN(4, 5, nonlinearity="relu", num_layers=2, bidirectional=True),
], ids=repr)
def test_recurrent_layers(rnn):
    torch.manual_seed(0)
    batch_first = rnn.batch_first
    x = torch.randn(2, 7, 4) if batch_first else torch.randn(7, 2, 4)
    check_export(WithState(rnn).eval(), (x,))


def test_initial_states_given():
    torch.manual_seed(0)
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    x, h0, c0 = torch.randn(5, 2, 3), torch.randn(4, 2, 4), torch.randn(4, 2, 4)
    check_export(WithState(lstm).eval(), (x, h0, c0))
    gru = nn.GRU(3, 4, batch_first=True)
    check_export(WithState(gru).eval(), (torch.randn(2, 5, 3), torch.randn(1, 2, 4)))


def test_unbatched_input():
    check_export(WithState(nn.GRU(3, 4)).eval(), (torch.randn(6, 3),))


class Cells(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTMCell(3, 4)
        self.gru = nn.GRUCell(3, 4)
        self.rnn = nn.RNNCell(3, 4, nonlinearity="relu")

    def forward(self, x, h, c):
        h1, c1 = self.lstm(x, (h, c))
        return h1, c1, self.gru(x, h1), self.rnn(x)


def test_cells():
    torch.manual_seed(0)
    check_export(Cells().eval(), (torch.randn(2, 3), torch.randn(2, 4), torch.randn(2, 4)))


@pytest.mark.parametrize("rnn", [nn.LSTM(3, 5, batch_first=True, bidirectional=True),
                                 nn.GRU(3, 5, batch_first=True, num_layers=2)], ids=repr)
def test_recurrent_layer_over_a_dynamic_time_axis(rnn):
    torch.manual_seed(0)
    check_dynamic(WithState(rnn), lambda T: (torch.randn(2, T, 3),), {"x": {1: "T"}},
                  [{"T": 4}, {"T": 9}, {"T": 15}], input_names=["x"])


def test_packed_sequences_are_refused():
    from t2n.errors import UnsupportedOpsError

    class Packed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = nn.GRU(3, 4)

        def forward(self, x):
            packed = nn.utils.rnn.pack_padded_sequence(x, torch.tensor([5, 3]))
            return self.rnn(packed)[1]

    with pytest.raises(UnsupportedOpsError, match="packed"):
        check_export(Packed().eval(), (torch.randn(5, 2, 3),))


def test_half_precision_recurrent_layers_tract():
    torch.manual_seed(0)
    model = WithState(nn.LSTM(4, 6, bidirectional=True, batch_first=True)).half().eval()
    check_export(model, (torch.randn(2, 5, 4).half(),), targets=("tract",))
    gru = WithState(nn.GRU(4, 6)).half().eval()
    check_export(gru, (torch.randn(5, 2, 4).half(),), targets=("tract",))


def test_tract_runs_a_gru_as_one_op_and_an_lstm_step_as_one_matmul_and_one_epilogue():
    """The forms tract's ONNX LSTM/GRU path runs fastest: no per-gate slice in the loop."""
    torch.manual_seed(0)
    x = torch.randn(2, 7, 4)
    gru = t2n.compile(WithState(nn.GRU(4, 5, num_layers=2, bidirectional=True, batch_first=True)).eval(), (x,),
                      t2n.TractNNEF.latest())
    assert gru.graph_nnef.count("tract_core_gru_seq(") == 4 and "tract_core_scan(" not in gru.graph_nnef
    assert gru.check().ok
    lstm = t2n.compile(WithState(nn.LSTM(4, 6, bidirectional=True, batch_first=True)).eval(), (x,),
                       t2n.TractNNEF.latest())
    # both directions share one loop body (same sizes): one epilogue, two loops
    assert lstm.graph_nnef.count("tract_core_lstm_epilogue(") == 1 and " slice(" not in lstm.graph_nnef
    assert lstm.graph_nnef.count("tract_core_scan(") == 2
    assert lstm.check().ok


@pytest.mark.parametrize("rnn, target, half", [
    (nn.GRU(4, 5, bidirectional=True), t2n.TractNNEF("0.23.0"), False),
    (nn.LSTM(4, 5, bidirectional=True), t2n.TractNNEF("0.23.0"), False),
    (nn.GRU(4, 5, bidirectional=True), t2n.TractNNEF.latest(), True),  # tract cannot plan an f16 gru_seq
], ids=["gru tract 0.23.0", "lstm tract 0.23.0", "f16 gru"])
def test_older_tract_and_half_precision_keep_the_scan_in_standard_operations(rnn, target, half):
    torch.manual_seed(0)
    model, x = WithState(rnn).eval(), torch.randn(6, 2, 4)
    if half:
        model, x = model.half(), x.half()
    artifact = t2n.compile(model, (x,), target)
    assert "tract_core_scan(" in artifact.graph_nnef
    assert "gru_seq" not in artifact.graph_nnef and "lstm_epilogue" not in artifact.graph_nnef
    assert artifact.check().ok
