"""IR ops for tract's own forms of two computations, made only by the passes of
:mod:`t2n.backends.tract.passes` for a ``TractNNEF`` that asks for them.

``tract_sdpa(q, k, v[, mask]) {scale}``: softmax(q kᵀ · scale + mask) v, one
``tract_transformers_sdpa`` in graph.nnef (``mask`` additive, broadcast like the scores).
``tract_debox(x) {factors}``: every element repeated ``factors[i]`` times along each
axis ``i`` (nearest upsampling by integer factors), one ``debox`` in graph.nnef.
``tract_nearest_upsample(x) {factors}``: every element of the trailing ``len(factors)``
axes repeated ``factors[i]`` times (axes before those untouched), NNEF's
``nearest_upsample``, which tract 0.23.9 runs as its own resize kernel.
``tract_gru_seq(x, w_ih, w_hh, h0[, b]) {hidden, reverse}``: a whole GRU direction over
a batch-major sequence, input projection included, one ``tract_core_gru_seq``: ``x``
[B, T, I], ``w_ih`` [3H, I], ``w_hh`` [3H, H], ``h0`` [B, H], ``b`` [6H] (the input then
the recurrent biases), gate blocks in ``rnn_scan``'s order
(:data:`t2n.ir.ops.rnn.GATE_ORDER`); outputs every step's hidden state [B, T, H] and the
last one [B, H].
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from t2n.ir import InferContext, OpSet, OpTable, TensorType
from t2n.ir.infer_utils import InferError, tensor
from t2n.ir.ops.rnn import step

TRACT_FORMS = OpTable("tract_forms")


def _sdpa_eval(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> list[np.ndarray]:
    q, k, v = (x.astype(np.float64) for x in xs[:3])
    scale = attrs["scale"]
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if len(xs) > 3:
        scores = scores + xs[3].astype(np.float64)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs = scores / scores.sum(axis=-1, keepdims=True)
    return [np.matmul(probs, v).astype(xs[0].dtype)]


@TRACT_FORMS.op("tract_sdpa", evaluate=_sdpa_eval)
def _sdpa(ctx: InferContext) -> list[TensorType]:
    """Output: q's type with v's last axis."""
    q, _, v = ctx.types[:3]
    return [tensor(q.dtype, [*q.shape[:-1], v.shape[-1]])]


def _debox_eval(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> list[np.ndarray]:
    out = xs[0]
    for axis, factor in enumerate(attrs["factors"]):
        out = np.repeat(out, int(factor), axis=axis)
    return [out]


@TRACT_FORMS.op("tract_debox", evaluate=_debox_eval)
def _debox(ctx: InferContext) -> list[TensorType]:
    """Output: x's type with each axis ``factors[axis]`` times longer."""
    (x,) = ctx.types
    factors = [int(f) for f in ctx.attrs["factors"]]
    return [tensor(x.dtype, [d * f if f != 1 else d for d, f in zip(x.shape, factors)])]


def _nearest_eval(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> list[np.ndarray]:
    out = xs[0]
    first = out.ndim - len(attrs["factors"])
    for i, factor in enumerate(attrs["factors"]):
        out = np.repeat(out, int(factor), axis=first + i)
    return [out]


@TRACT_FORMS.op("tract_nearest_upsample", evaluate=_nearest_eval)
def _nearest_upsample(ctx: InferContext) -> list[TensorType]:
    """x's type with each of its trailing axes ``factors[i]`` times longer."""
    (x,) = ctx.types
    factors = [int(f) for f in ctx.attrs["factors"]]
    if not factors or len(factors) > x.rank or any(f < 1 for f in factors):
        raise InferError(f"tract_nearest_upsample: factors {factors} for a rank-{x.rank} tensor")
    first = x.rank - len(factors)
    return [tensor(x.dtype, [d if i < first or factors[i - first] == 1 else d * factors[i - first]
                             for i, d in enumerate(x.shape)])]


def _gru_eval(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> list[np.ndarray]:
    x, w_ih, w_hh, h = xs[:4]
    hidden = int(attrs["hidden"])
    b = xs[4] if len(xs) > 4 else np.zeros(6 * hidden, dtype=x.dtype)
    xw = x @ w_ih.T + b[:3 * hidden]
    steps = range(x.shape[1] - 1, -1, -1) if attrs.get("reverse") else range(x.shape[1])
    ys = [np.empty(0)] * x.shape[1]
    for t in steps:
        h, _ = step("gru", xw[:, t], h, None, w_hh, b[3 * hidden:], None, hidden)
        ys[t] = h
    return [np.stack(ys, axis=1).astype(x.dtype), h.astype(x.dtype)]


@TRACT_FORMS.op("tract_gru_seq", evaluate=_gru_eval)
def _gru_seq(ctx: InferContext) -> list[TensorType]:
    """Every step's hidden state [B, T, H] and the last one [B, H]."""
    x, w_ih, w_hh, h0 = ctx.types[:4]
    hidden = int(ctx.attrs["hidden"])
    if x.rank != 3 or w_ih.rank != 2 or w_hh.rank != 2 or h0.rank != 2:
        raise InferError("tract_gru_seq: x is [B, T, I], the weights 2-D, h0 [B, H]")
    return [tensor(x.dtype, [x.shape[0], x.shape[1], hidden]), tensor(x.dtype, [x.shape[0], hidden])]


def with_tract_forms(opset: OpSet) -> OpSet:
    """``opset`` with the ops above (unchanged if it has them)."""
    return opset if "tract_sdpa" in opset else opset.extended(TRACT_FORMS)
