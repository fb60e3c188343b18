"""The token mixers of hybrid language models, computed for any number of new tokens
from explicit states: ``(hidden, conv state, recurrent state)`` → ``(output, new conv
state, new recurrent state)``.

``transformers`` computes a prompt (no state) and one generated token (a state) by two
different code paths, and its prompt path loops over chunks in Python, which a trace
would fix to the traced length. These functions are the one path for both: the causal
convolution reads ``[conv state, new tokens]`` (zeros for a prompt: the zero padding of
the prompt path), the recurrence starts from the state given (zeros for a prompt) and
runs as one op (:mod:`t2n.llm.decoder.recurrent_ops`). They call the mixer's own layers and
parameters, so the weights keep their names.

``MIXERS`` maps a mixer class name to its function. The conv state is the last
``kernel`` inputs of the convolution, ``[B, channels, kernel]``, as ``transformers``
keeps it; the recurrent states are f32.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from t2n.llm.decoder import recurrent_ops

Mixer = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor, Any], tuple[torch.Tensor, torch.Tensor, Any]]
"""``(mixer, hidden, conv state, recurrent state)`` → ``(output, conv state, recurrent state)``;
a mixer with a conv state only (LFM2's short convolution) takes and returns None for the other."""


def causal_conv(x: torch.Tensor, state: torch.Tensor, conv: torch.nn.Conv1d, activation: str | None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Depthwise causal convolution of ``x`` ``[B, C, S]`` after ``state`` ``[B, C, K]``:
    (the ``S`` outputs, activated; the last ``K`` inputs as the next state)."""
    kernel = state.shape[-1]
    full = torch.cat([state.to(x.dtype), x], dim=-1).to(conv.weight.dtype)
    out = F.conv1d(full, conv.weight, conv.bias, groups=full.shape[1])[:, :, 1:]
    if activation is not None:
        from transformers.activations import ACT2FN

        out = ACT2FN[activation](out)
    return out.to(x.dtype), full[:, :, -kernel:]


def gated_delta_net(mixer: torch.nn.Module, hidden: torch.Tensor, conv_state: torch.Tensor, state: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Qwen3-Next's gated delta-net (``Qwen3NextGatedDeltaNet``: queries, keys, values and
    gate in one projection, interleaved by key head)."""
    m: Any = mixer  # a transformers mixer class: its layers and parameters, read by name
    batch, length = hidden.shape[0], hidden.shape[1]
    query, key, value, z, b, a = m.fix_query_key_value_ordering(m.in_proj_qkvz(hidden), m.in_proj_ba(hidden))
    mixed = torch.cat([x.reshape(batch, length, -1) for x in (query, key, value)], dim=-1)
    return _gated_delta(m, mixed, z, b.sigmoid(), a, conv_state, state, m.norm, m.out_proj)


def gated_delta_net_split(mixer: torch.nn.Module, hidden: torch.Tensor, conv_state: torch.Tensor,
                          state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Qwen3.5's gated delta-net (``Qwen3_5GatedDeltaNet``, ``Qwen3_5MoeGatedDeltaNet``,
    ``LaraMiniGatedDeltaNet``): Qwen3-Next's with queries, keys and values in one projection
    (not interleaved) and the gate, ``b`` and ``a`` in projections of their own."""
    m: Any = mixer
    z = m.in_proj_z(hidden).reshape(hidden.shape[0], hidden.shape[1], -1, m.head_v_dim)
    return _gated_delta(m, m.in_proj_qkv(hidden), z, m.in_proj_b(hidden).sigmoid(), m.in_proj_a(hidden), conv_state,
                        state, m.norm, m.out_proj)


def gated_delta_net_olmo(mixer: torch.nn.Module, hidden: torch.Tensor, conv_state: torch.Tensor,
                         state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """OLMo-Hybrid's gated delta-net (``OlmoHybridGatedDeltaNet``): a projection each for
    queries, keys, values, gate, ``b`` and ``a``; ``beta`` doubled with negative
    eigenvalues allowed (``allow_neg_eigval``)."""
    m: Any = mixer
    mixed = torch.cat([m.q_proj(hidden), m.k_proj(hidden), m.v_proj(hidden)], dim=-1)
    beta = m.b_proj(hidden).sigmoid() * (2.0 if m.allow_neg_eigval else 1.0)
    return _gated_delta(m, mixed, m.g_proj(hidden), beta, m.a_proj(hidden), conv_state, state, m.o_norm, m.o_proj)


def _gated_delta(m: Any, mixed: torch.Tensor, z: torch.Tensor, beta: torch.Tensor, a: torch.Tensor,
                 conv_state: torch.Tensor, state: torch.Tensor, norm: torch.nn.Module, out_proj: torch.nn.Module
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The gated delta-net after its projections: ``mixed`` ``[B, S, 2 key_dim + value_dim]``
    (queries, keys, values) through the causal convolution, then the gated delta rule,
    its output normed with the gate ``z`` and projected out."""
    batch, length = mixed.shape[0], mixed.shape[1]
    mixed, conv_state = causal_conv(mixed.transpose(1, 2), conv_state, m.conv1d, m.activation)
    query, key, value = torch.split(mixed.transpose(1, 2), [m.key_dim, m.key_dim, m.value_dim], dim=-1)
    query = query.reshape(batch, length, -1, m.head_k_dim)
    key = key.reshape(batch, length, -1, m.head_k_dim)
    value = value.reshape(batch, length, -1, m.head_v_dim)
    log_decay = -m.A_log.float().exp() * F.softplus(a.float() + m.dt_bias)
    if m.num_v_heads != m.num_k_heads:
        repeat = m.num_v_heads // m.num_k_heads
        query, key = query.repeat_interleave(repeat, dim=2), key.repeat_interleave(repeat, dim=2)
    out, state = recurrent_ops.gated_delta_rule(query, key, value, log_decay, beta, state, True)
    out = norm(out.reshape(-1, out.shape[-1]), z.reshape(-1, out.shape[-1]))
    return out_proj(out.reshape(batch, length, -1)), conv_state, state


def short_conv(mixer: torch.nn.Module, hidden: torch.Tensor, conv_state: torch.Tensor, state: None
               ) -> tuple[torch.Tensor, torch.Tensor, None]:
    """LFM2's gated short convolution (``Lfm2ShortConv``, ``Lfm2MoeShortConv``,
    ``Lfm3ShortConv``): ``C * conv(B * x)``, a conv state and no recurrent one."""
    m: Any = mixer
    gate_in, gate_out, x = m.in_proj(hidden).transpose(-1, -2).chunk(3, dim=-2)
    y, conv_state = causal_conv(gate_in * x, conv_state, m.conv, None)
    return m.out_proj((gate_out * y).transpose(-1, -2).contiguous()), conv_state, None


def mamba(mixer: torch.nn.Module, hidden: torch.Tensor, conv_state: torch.Tensor, state: torch.Tensor
          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mamba's selective state space (``MambaMixer``; Jamba's ``JambaMambaMixer`` and
    ``FalconMambaMixer`` add RMS norms on the time step, B and C)."""
    m: Any = mixer  # a transformers mixer class: its layers and parameters, read by name
    dtype = hidden.dtype
    x, gate = m.in_proj(hidden).transpose(1, 2).chunk(2, dim=1)
    x, conv_state = causal_conv(x, conv_state, m.conv1d, m.activation)
    x = x.transpose(1, 2)  # [B, S, D]
    step, b, c = torch.split(m.x_proj(x), [m.time_step_rank, m.ssm_state_size, m.ssm_state_size],
                             dim=-1)
    if hasattr(m, "dt_layernorm"):
        step, b, c = m.dt_layernorm(step), m.b_layernorm(b), m.c_layernorm(c)
    dt = (m.dt_proj.weight @ step.transpose(1, 2)).transpose(1, 2)  # [B, S, D]
    dt = F.softplus(dt + m.dt_proj.bias.to(dt.dtype)).float()
    a = -torch.exp(m.A_log.float())  # [D, N]
    decay = torch.exp(a * dt[..., None])  # [B, S, D, N]
    update = dt[..., None] * b.float()[:, :, None, :] * x.float()[..., None]
    y, state = recurrent_ops.ssm_scan(decay, update, c.float()[:, :, None, :], state)
    y = (y + x.float() * m.D.float()) * F.silu(gate.transpose(1, 2).float())
    return m.out_proj(y.to(dtype)), conv_state, state


def zamba_mamba(mixer: torch.nn.Module, hidden: torch.Tensor, conv_state: torch.Tensor, state: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Zamba's multi-head Mamba (``ZambaMambaMixer``): Mamba's selective state space run
    on ``n_mamba_heads`` slices of the channels, each with its own ``x_proj`` and
    ``dt_proj``; its input projection interleaves the channels and the gate."""
    m: Any = mixer  # a transformers mixer class: its layers and parameters, read by name
    batch, length, dtype = hidden.shape[0], hidden.shape[1], hidden.dtype
    heads, width = m.n_mamba_heads, m.mamba_head_dim
    projected = m.in_proj(hidden).transpose(1, 2).reshape(batch, -1, 2, length)
    x, gate = projected[:, :, 0], projected[:, :, 1]  # [B, D, S] each
    x, conv_state = causal_conv(x, conv_state, m.conv1d, m.activation)
    xh = x.reshape(batch, heads, width, length).transpose(0, 1)  # [H, B, P, S]
    params = (m.x_proj_weight[:, None] @ xh).transpose(-1, -2)  # [H, B, S, R + 2N]
    step, b, c = torch.split(params, [m.time_step_rank, m.ssm_state_size, m.ssm_state_size], dim=-1)
    dt = m.dt_proj_weight[:, None] @ step.transpose(-1, -2)  # [H, B, P, S]
    dt = F.softplus(dt + m.dt_proj_bias.float()[:, None, :, None]).float()
    dt = dt.permute(1, 3, 0, 2)  # [B, S, H, P]
    decay = torch.exp(-torch.exp(m.A_log.float()) * dt[..., None])  # [B, S, H, P, N]
    xs = xh.permute(1, 3, 0, 2).float()  # [B, S, H, P]
    update = dt[..., None] * b.permute(1, 2, 0, 3).float()[:, :, :, None, :] * xs[..., None]
    y, state = recurrent_ops.ssm_scan(decay, update, c.permute(1, 2, 0, 3).float()[:, :, :, None, :], state)
    y = y + xs * m.D.float()  # [B, S, H, P]
    y = y.reshape(batch, length, -1) * F.silu(gate.transpose(1, 2).float())
    return m.out_proj(y.to(dtype)), conv_state, state


def mamba2(mixer: torch.nn.Module, hidden: torch.Tensor, conv_state: torch.Tensor, state: torch.Tensor
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mamba-2's state space duality layer (``Mamba2Mixer``; Falcon-H1's ``FalconH1Mixer``
    adds MuP multipliers on its input and projections and makes the gated RMS norm
    optional)."""
    m: Any = mixer  # a transformers mixer class: its layers and parameters, read by name
    batch, length, dtype = hidden.shape[0], hidden.shape[1], hidden.dtype
    projected = m.in_proj(hidden * getattr(m, "ssm_in_multiplier", 1.0))
    if getattr(m, "mup_vector", None) is not None:
        projected = projected * m.mup_vector
    gate, xbc, dt = projected.split([m.intermediate_size, m.conv_dim, m.num_heads], dim=-1)
    xbc, conv_state = causal_conv(xbc.transpose(1, 2), conv_state, m.conv1d, m.activation)
    groups = m.n_groups * m.ssm_state_size
    x, b, c = torch.split(xbc.transpose(1, 2), [m.intermediate_size, groups, groups], dim=-1)
    dt = F.softplus(dt + m.dt_bias.to(dt.dtype))
    low, high = m.time_step_limit or (0.0, float("inf"))
    if (low, high) != (0.0, float("inf")):
        dt = torch.clamp(dt, low, high)
    dt = dt.float()  # [B, S, H]
    heads, repeat = m.num_heads, m.num_heads // m.n_groups
    xh = x.reshape(batch, length, heads, m.head_dim).float()
    bh = b.reshape(batch, length, m.n_groups, -1).float().repeat_interleave(repeat, dim=2)
    ch = c.reshape(batch, length, m.n_groups, -1).float().repeat_interleave(repeat, dim=2)
    decay = torch.exp(dt * -torch.exp(m.A_log.float()))[..., None, None]  # [B, S, H, 1, 1]
    update = (dt[..., None] * xh)[..., None] * bh[:, :, :, None, :]  # [B, S, H, P, N]
    y, state = recurrent_ops.ssm_scan(decay, update, ch[:, :, :, None, :], state)
    y = (y + m.D.float()[:, None] * xh).reshape(batch, length, -1)
    y = m.norm(y, gate) if getattr(m, "mamba_rms_norm", True) else y * F.silu(gate.float())
    return m.out_proj(y.to(dtype)), conv_state, state


MIXERS: dict[str, Mixer] = {
    "Qwen3NextGatedDeltaNet": gated_delta_net,
    "Qwen3_5GatedDeltaNet": gated_delta_net_split,
    "Qwen3_5MoeGatedDeltaNet": gated_delta_net_split,
    "LaraMiniGatedDeltaNet": gated_delta_net_split,  # Qwen3.5's (transformers 5.25)
    "OlmoHybridGatedDeltaNet": gated_delta_net_olmo,
    "MambaMixer": mamba,
    "Lfm2ShortConv": short_conv,
    "Lfm2MoeShortConv": short_conv,
    "Lfm3ShortConv": short_conv,
    "FalconMambaMixer": mamba,
    "JambaMambaMixer": mamba,
    "ZambaMambaMixer": zamba_mamba,
    "Mamba2Mixer": mamba2,
    "FalconH1Mixer": mamba2,
    "BambaMixer": mamba2,
    "GraniteMoeHybridMambaLayer": mamba2,
    "Zamba2MambaMixer": mamba2,
    "NemotronHMamba2Mixer": mamba2,
}
"""Mixer class name → its explicit-state function."""
