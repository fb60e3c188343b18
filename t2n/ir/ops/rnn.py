"""One direction of one recurrent layer over a time-major sequence.

Inputs: ``xw`` [T, B, G*H] (the input projection of every step, computed outside the
loop, with every bias that can be added there), ``h0`` [B, P], then ``c0`` [B, H] for
LSTM, the recurrent weight ``w_hh`` [G*H, P], the GRU's recurrent bias ``b_hh`` [G*H]
(GRU only: it sits inside the reset gate), and the LSTM projection ``w_hr`` [P, H] when
``proj``. Outputs: every step's hidden state [T, B, P], the last hidden state [B, P],
and the last cell state [B, H] for LSTM. Attrs: mode (lstm, gru, rnn_tanh, rnn_relu),
hidden H, reverse, proj.

Gate blocks (of ``xw``, ``w_hh`` and ``b_hh``) are in the order tract's fused kernels
read: LSTM input, output, forget, cell (PyTorch: i, f, g, o); GRU update, reset, new
(PyTorch: r, z, n). ``GATE_ORDER`` maps each position to PyTorch's block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from t2n.ir.attributes import BOOL, INT, STR, optional, required
from t2n.ir.infer_utils import InferError, tensor
from t2n.ir.schema import InferContext, OpTable
from t2n.ir.types import TensorType

TABLE = OpTable("rnn")

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}

GATE_ORDER = {"lstm": (0, 3, 1, 2), "gru": (1, 0, 2)}
"""For each gate position of ``rnn_scan``, the PyTorch gate block it holds."""


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)))


def step(mode: str, xw: np.ndarray, h: np.ndarray, c: np.ndarray | None, w_hh: np.ndarray,
         b_hh: np.ndarray | None, w_hr: np.ndarray | None, hidden: int) -> tuple[np.ndarray, np.ndarray | None]:
    """One time step in numpy (the reference the emitted NNEF must agree with)."""
    hw = h @ w_hh.T
    if mode == "lstm":
        g = xw + hw
        i, o, f, gg = (g[:, k * hidden:(k + 1) * hidden] for k in range(4))
        assert c is not None
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(gg)
        h = _sigmoid(o) * np.tanh(c)
        if w_hr is not None:
            h = h @ w_hr.T
        return h, c
    if mode == "gru":
        if b_hh is not None:
            hw = hw + b_hh
        xz, xr, xn = (xw[:, k * hidden:(k + 1) * hidden] for k in range(3))
        hz, hr, hn = (hw[:, k * hidden:(k + 1) * hidden] for k in range(3))
        r, z = _sigmoid(xr + hr), _sigmoid(xz + hz)
        n = np.tanh(xn + r * hn)
        return (1 - z) * n + z * h, None
    pre = xw + hw
    return (np.tanh(pre) if mode == "rnn_tanh" else np.maximum(pre, 0)), None


def _eval(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
    mode, hidden = a["mode"], int(a["hidden"])
    xw, h = xs[0], xs[1]
    rest = list(xs[2:])
    c = rest.pop(0) if mode == "lstm" else None
    w_hh = rest.pop(0)
    b_hh = rest.pop(0) if mode == "gru" and rest and rest[0].ndim == 1 else None
    w_hr = rest.pop(0) if a.get("proj") else None
    steps = range(xw.shape[0] - 1, -1, -1) if a.get("reverse") else range(xw.shape[0])
    ys = [np.empty(0)] * xw.shape[0]
    for t in steps:
        h, c = step(mode, xw[t], h, c, w_hh, b_hh, w_hr, hidden)
        ys[t] = h
    outs = [np.stack(ys).astype(xw.dtype), h.astype(xw.dtype)]
    if c is not None:
        outs.append(c.astype(xw.dtype))
    return outs


@TABLE.op("rnn_scan", evaluate=_eval, attrs={"mode": required(STR), "hidden": required(INT),
                                              "reverse": optional(BOOL, False), "proj": optional(BOOL, False)})
def _rnn_scan(ctx: InferContext) -> list[TensorType]:
    mode = ctx.attrs["mode"]
    if mode not in GATES:
        raise InferError(f"rnn_scan: unknown mode {mode!r}")
    xw, h0 = ctx.types[0], ctx.types[1]
    hidden = int(ctx.attrs["hidden"])
    if xw.rank != 3 or h0.rank != 2:
        raise InferError("rnn_scan: xw is [T, B, G*H] and h0 is [B, P]")
    if xw.shape[2] != GATES[mode] * hidden:
        raise InferError(f"rnn_scan: xw has {xw.shape[2]} features, expected {GATES[mode]} x {hidden}")
    t, b = xw.shape[0], xw.shape[1]
    p = h0.shape[1]
    outs = [tensor(xw.dtype, [t, b, p]), tensor(xw.dtype, [b, p])]
    if mode == "lstm":
        outs.append(tensor(xw.dtype, [b, hidden]))
    return outs
