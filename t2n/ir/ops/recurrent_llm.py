"""The recurrences of hybrid language models (linear attention and state-space layers),
one op each over the tokens of a call (axis 1, whose length may be a symbol), from a
state given as an input to the last state as an output, so that a prompt (zero state)
and each generated token (the state fed back) run the same graph.

``gated_delta_rule(q, k, v, log_decay, beta, state) {qk_l2norm}`` → (o, last state):
q, k ``[B, T, H, Dk]``, v ``[B, T, H, Dv]``, log_decay and beta ``[B, T, H]``, state
``[B, H, Dk, Dv]`` (f32). Per token, in f32: ``S = S·exp(g)``,
``S = S + k ⊗ (v - kᵀS)·beta``, ``o = qᵀS`` (q, k L2-normalised with eps 1e-6 when
``qk_l2norm``; q scaled by ``Dk^-1/2``); o in v's dtype. (Qwen3-Next.)

``ssm_scan(decay, update, readout, state)`` → (y, last state): per token
``h = decay·h + update``, ``y = Σ_last h·readout``, in f32; update ``[B, T, *S]``,
decay and readout of the same rank broadcasting against it, state ``[B, *S]``,
y ``[B, T, *S[:-1]]``. (Mamba's and Mamba-2's selective scans, discretised outside.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from t2n.ir.attributes import BOOL, NO_ATTRS, optional
from t2n.ir.dtypes import DType
from t2n.ir.infer_utils import InferError, tensor
from t2n.ir.schema import InferContext, OpTable
from t2n.ir.types import TensorType

TABLE = OpTable("recurrent_llm")


def _l2norm(x: np.ndarray) -> np.ndarray:
    return np.asarray(x / np.sqrt((x * x).sum(-1, keepdims=True) + np.float32(1e-6)))


def _eval_gdn(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
    q, k, v, g, beta = (x.astype(np.float32) for x in xs[:5])
    s = xs[5].astype(np.float32)
    if a.get("qk_l2norm"):
        q, k = _l2norm(q), _l2norm(k)
    q = q / np.float32(np.sqrt(q.shape[-1]))
    outs = []
    for t in range(q.shape[1]):
        s = s * np.exp(g[:, t])[..., None, None]
        delta = (v[:, t] - (s * k[:, t, :, :, None]).sum(-2)) * beta[:, t, :, None]
        s = s + k[:, t, :, :, None] * delta[:, :, None, :]
        outs.append((s * q[:, t, :, :, None]).sum(-2))
    return [np.stack(outs, 1).astype(xs[2].dtype), s]


@TABLE.op("gated_delta_rule", evaluate=_eval_gdn, attrs={"qk_l2norm": optional(BOOL, False)})
def _gated_delta_rule(ctx: InferContext) -> list[TensorType]:
    q, k, v, g, beta, state = ctx.types
    if q.rank != 4 or k.shape != q.shape or v.rank != 4 or v.shape[:3] != q.shape[:3]:
        raise InferError("gated_delta_rule: q and k are [B, T, H, Dk] and v [B, T, H, Dv]")
    if g.shape != q.shape[:3] or beta.shape != q.shape[:3]:
        raise InferError("gated_delta_rule: log_decay and beta are [B, T, H]")
    if state.rank != 4 or state.shape[1:] != (q.shape[2], q.shape[3], v.shape[3]) or state.dtype is not DType.F32:
        raise InferError("gated_delta_rule: the state is f32 [B, H, Dk, Dv]")
    return [tensor(v.dtype, list(v.shape)), state]


def _eval_ssm(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
    decay, update, readout = (x.astype(np.float32) for x in xs[:3])
    h = xs[3].astype(np.float32)
    ys = []
    for t in range(update.shape[1]):
        h = decay[:, t] * h + update[:, t]
        ys.append((h * readout[:, t]).sum(-1))
    return [np.stack(ys, 1).astype(np.float32), h]


@TABLE.op("ssm_scan", evaluate=_eval_ssm, attrs=NO_ATTRS)
def _ssm_scan(ctx: InferContext) -> list[TensorType]:
    decay, update, readout, state = ctx.types
    if update.rank < 3 or state.rank != update.rank - 1:
        raise InferError("ssm_scan: update is [B, T, *S] and the state [B, *S]")
    if decay.rank != update.rank or readout.rank != update.rank:
        raise InferError("ssm_scan: decay and readout have update's rank")
    for name, t in (("decay", decay), ("update", update), ("readout", readout), ("state", state)):
        if t.dtype is not DType.F32:
            raise InferError(f"ssm_scan: {name} is f32, got {t.dtype.value}")
    for axis in range(2, update.rank):
        for name, t in (("decay", decay), ("readout", readout)):
            if t.shape[axis] not in (1, update.shape[axis]):
                raise InferError(f"ssm_scan: {name} does not broadcast against update on axis {axis}")
    return [tensor(DType.F32, list(update.shape[:-1])), state]
