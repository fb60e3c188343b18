"""A whole GRU direction over a batch-major sequence, input projection included, for the
engines that run it as one kernel (tract's ``tract_core_gru_seq``).

``gru_sequence(x, w_ih, w_hh, h0[, b])``: ``x`` [B, T, I], ``w_ih`` [3H, I], ``w_hh``
[3H, H], ``h0`` [B, H], ``b`` [6H] (the input then the recurrent biases); gate blocks in
``rnn_scan``'s order (update, reset, new: :data:`t2n.ir.ops.rnn.GATE_ORDER`). Outputs:
every step's hidden state [B, T, H] and the last one [B, H]. Attrs: hidden, reverse.
Made by :mod:`t2n.passes.gru_sequence` from an ``rnn_scan`` and its input projection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from t2n.ir.infer_utils import InferError, tensor
from t2n.ir.ops.rnn import step
from t2n.ir.schema import InferContext, OpTable
from t2n.ir.types import TensorType

TABLE = OpTable("gru_sequence")


def _eval(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
    x, w_ih, w_hh, h = xs[:4]
    hidden = int(a["hidden"])
    b = xs[4] if len(xs) > 4 else np.zeros(6 * hidden, dtype=x.dtype)
    xw = x @ w_ih.T + b[:3 * hidden]
    steps = range(x.shape[1] - 1, -1, -1) if a.get("reverse") else range(x.shape[1])
    ys = [np.empty(0)] * x.shape[1]
    for t in steps:
        h, _ = step("gru", xw[:, t], h, None, w_hh, b[3 * hidden:], None, hidden)
        ys[t] = h
    return [np.stack(ys, axis=1).astype(x.dtype), h.astype(x.dtype)]


@TABLE.op("gru_sequence", evaluate=_eval)
def _gru_sequence(ctx: InferContext) -> list[TensorType]:
    x, w_ih, w_hh, h0 = ctx.types[:4]
    hidden = int(ctx.attrs["hidden"])
    if x.rank != 3 or w_ih.rank != 2 or w_hh.rank != 2 or h0.rank != 2:
        raise InferError("gru_sequence: x is [B, T, I], the weights 2-D, h0 [B, H]")
    return [tensor(x.dtype, [x.shape[0], x.shape[1], hidden]), tensor(x.dtype, [x.shape[0], hidden])]
