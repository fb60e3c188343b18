"""Recurrent 2-D models (sequencer style: bidirectional LSTMs over the rows and over the
columns of a feature map, joined by a linear layer) load in tract in moments. tract
0.23.9's optimizer never finished loading an earlier emission of them (the linear layer
flattened its input to 2-D, merging axes that come out of the recurrent loops), so the
load runs in a child process with a deadline: a hang fails the test instead of the run."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import t2n

LOAD_DEADLINE_S = 120  # the form t2n writes loads in well under a second


class Sequencer2D(nn.Module):
    """One sequencer block on a [B, H, W, C] map: BiLSTM down the columns, BiLSTM along
    the rows, concat, linear, residual."""

    def __init__(self, channels: int = 16, hidden: int = 8) -> None:
        super().__init__()
        self.rnn_v = nn.LSTM(channels, hidden, batch_first=True, bidirectional=True)
        self.rnn_h = nn.LSTM(channels, hidden, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(4 * hidden, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, h, w, c = x.shape
        v, _ = self.rnn_v(x.permute(0, 2, 1, 3).reshape(-1, h, c))
        v = v.reshape(b, w, h, -1).permute(0, 2, 1, 3)
        r, _ = self.rnn_h(x.reshape(-1, w, c))
        r = r.reshape(b, h, w, -1)
        return x + self.fc(torch.cat([v, r], dim=-1))


class SequencerNet(nn.Module):
    def __init__(self, depth: int = 2) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 4, stride=4)
        self.blocks = nn.Sequential(*[Sequencer2D() for _ in range(depth)])
        self.head = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.blocks(self.stem(x).permute(0, 2, 3, 1))
        return self.head(y.mean(dim=(1, 2)))


def load_in_tract_within_deadline(path: Path) -> None:
    code = ("import sys, tract; m = tract.nnef().load(sys.argv[1]); m.into_runnable(); print('loaded')")
    try:
        done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                              timeout=LOAD_DEADLINE_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"tract did not finish loading {path.name} within {LOAD_DEADLINE_S} s") from None
    assert done.returncode == 0 and "loaded" in done.stdout, done.stderr[-2000:]


def test_sequencer_block_loads_and_matches(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Sequencer2D().eval()
    art = t2n.compile(model, (torch.randn(1, 3, 3, 16),), t2n.TractNNEF())
    art.save(tmp_path / "block")
    load_in_tract_within_deadline(tmp_path / "block")
    assert art.check().ok


def test_sequencer_network_loads_and_matches(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = SequencerNet().eval()
    art = t2n.compile(model, (torch.randn(1, 3, 16, 16),), t2n.TractNNEF())
    art.save(tmp_path / "net")
    load_in_tract_within_deadline(tmp_path / "net")
    assert art.check().ok


def test_quantized_linear_after_the_loops_stays_float_and_loads(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    torch.manual_seed(0)
    model = t2n.quantize(Sequencer2D(channels=32, hidden=16).eval(), "min_max_q4_0")
    with caplog.at_level(logging.INFO, logger="t2n.quant"):
        art = t2n.compile(model, (torch.randn(1, 3, 3, 32),), t2n.TractNNEF())
    assert "'fc.weight' is written in float" in caplog.text and "after a recurrent loop" in caplog.text
    art.save(tmp_path / "q")
    load_in_tract_within_deadline(tmp_path / "q")
    assert art.check().ok
