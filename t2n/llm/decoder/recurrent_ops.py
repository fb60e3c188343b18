"""The two recurrences of hybrid language models, as ``torch.library`` ops that a trace
records as one node each (``t2n::gated_delta_rule``, ``t2n::ssm_scan``): the loop over
the tokens of a call cannot be traced (its length is the symbol ``S``), so the mixers of
:mod:`t2n.llm.decoder.recurrent_mixers` call these, and the lowering rules of
``t2n.frontend.lowering.recurrent_llm`` turn them into the IR ops of the same names.

Their bodies are the reference PyTorch computes the samples and checks with: one step
per token, in f32, from the state given (zeros for a prompt), as ``transformers``'
recurrent (per-token) paths compute it.
"""

from __future__ import annotations

import torch


@torch.library.custom_op("t2n::gated_delta_rule", mutates_args=())
def gated_delta_rule(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, log_decay: torch.Tensor,
                     beta: torch.Tensor, state: torch.Tensor, qk_l2norm: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Gated delta rule over the tokens of one call (Qwen3-Next's linear attention).

    ``query``, ``key`` ``[B, T, H, Dk]``, ``value`` ``[B, T, H, Dv]``, ``log_decay`` and
    ``beta`` ``[B, T, H]``, ``state`` ``[B, H, Dk, Dv]``. For each token, in f32:
    ``S *= exp(g)``, ``S += k ⊗ (v - kᵀS) · beta``, ``o = qᵀS`` with ``q`` and ``k``
    L2-normalised (``qk_l2norm``, eps 1e-6) and ``q`` scaled by ``Dk^-1/2``.
    Returns (outputs ``[B, T, H, Dv]`` in ``value``'s dtype, the last state in f32)."""
    q, k, v, g, b = (x.float() for x in (query, key, value, log_decay, beta))
    if qk_l2norm:
        q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    q = q / q.shape[-1] ** 0.5
    s = state.float().clone()
    outputs = []
    for t in range(q.shape[1]):
        s = s * g[:, t].exp()[..., None, None]
        remembered = (s * k[:, t, :, :, None]).sum(-2)
        delta = (v[:, t] - remembered) * b[:, t, :, None]
        s = s + k[:, t, :, :, None] * delta[:, :, None, :]
        outputs.append((s * q[:, t, :, :, None]).sum(-2))
    return torch.stack(outputs, 1).to(value.dtype), s


@gated_delta_rule.register_fake
def _gated_delta_rule_fake(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, log_decay: torch.Tensor,
                           beta: torch.Tensor, state: torch.Tensor, qk_l2norm: bool
                           ) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(value), torch.empty_like(state, dtype=torch.float32)


@torch.library.custom_op("t2n::ssm_scan", mutates_args=())
def ssm_scan(decay: torch.Tensor, update: torch.Tensor, readout: torch.Tensor,
             state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A diagonal linear recurrence read out along its last axis (the selective scan of
    Mamba and Mamba-2), over axis 1 (the tokens):

    ``h_t = decay_t · h_{t-1} + update_t``; ``y_t = Σ_n h_t[..., n] · readout_t[..., n]``.

    ``update`` ``[B, T, *state]``; ``decay`` and ``readout`` broadcast against it;
    ``state`` ``[B, *state]``. Returns (``y`` ``[B, T, *state[:-1]]``, the last state)."""
    h = state.float().clone()
    outputs = []
    for t in range(update.shape[1]):
        h = decay[:, t].float() * h + update[:, t].float()
        outputs.append((h * readout[:, t].float()).sum(-1))
    return torch.stack(outputs, 1), h


@ssm_scan.register_fake
def _ssm_scan_fake(decay: torch.Tensor, update: torch.Tensor, readout: torch.Tensor,
                   state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return update.new_empty(update.shape[:-1], dtype=torch.float32), torch.empty_like(state, dtype=torch.float32)
