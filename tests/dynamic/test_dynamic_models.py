"""Realistic models over a dynamic sequence axis, run in tract at several lengths."""

from __future__ import annotations

import math

import torch
from torch import nn

from t2n.testing import check_dynamic

SIZES = [{"S": 5}, {"S": 9}, {"S": 16}]


class PaddedEncoder(nn.Module):
    """A transformer encoder fed a padding mask derived from per-sequence lengths."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.size(1)).unsqueeze(0)
        padding = positions >= lengths.unsqueeze(1)
        return self.layer(x, src_key_padding_mask=padding)


def test_transformer_encoder_with_padding_mask_over_dynamic_length() -> None:
    torch.manual_seed(0)
    model = PaddedEncoder()

    def make(S: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(2, S, 16), torch.tensor([S, max(1, S - 2)])

    check_dynamic(model, make, {"x": {1: "S"}}, SIZES, input_names=["x", "lengths"])


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat([-b, a], dim=-1)


class RotaryCausalBlock(nn.Module):
    """A decoder self-attention block: rotary position code, causal mask, residual MLP."""

    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.SiLU(), nn.Linear(2 * dim, dim))
        inv = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        self.register_buffer("inv_freq", inv)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        t = torch.arange(s, dtype=torch.float32)
        freqs = torch.outer(t, self.inv_freq)
        emb = torch.cat([freqs, freqs], dim=-1)
        cos, sin = emb.cos(), emb.sin()
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        causal = torch.ones(s, s, dtype=torch.bool).tril()
        scores = torch.where(causal, scores, torch.full_like(scores, float("-inf")))
        att = scores.softmax(-1) @ v
        x = x + self.out(att.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(x)


def test_causal_decoder_block_with_rotary_over_dynamic_length() -> None:
    torch.manual_seed(0)
    check_dynamic(RotaryCausalBlock(), lambda S: (torch.randn(1, S, 16),), {"x": {1: "S"}}, SIZES,
                  input_names=["x"])


class SdpaCausal(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 24)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.proj(x).unflatten(-1, (3, 2, 4)).permute(2, 0, 3, 1, 4)
        return nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_sdpa_is_causal_over_dynamic_length() -> None:
    torch.manual_seed(0)
    check_dynamic(SdpaCausal(), lambda S: (torch.randn(2, S, 8),), {"x": {1: "S"}}, SIZES,
                  input_names=["x"])


def test_integer_running_sums_and_pairwise_index_over_a_dynamic_axis():
    """Position ids from a cumsum of a mask, and a mask looked up with two index
    tensors, as transformers' masking code does."""

    class Masks(nn.Module):
        def forward(self, x, mask):
            positions = mask.long().cumsum(-1) - 1
            s = x.shape[1]
            pair = mask[torch.arange(1)[:, None, None], torch.arange(s)[None, None, :]]
            return x * pair.transpose(1, 2).float() + positions.unsqueeze(-1)

    def make(S):
        mask = torch.ones(1, S, dtype=torch.bool)
        mask[0, S - 2:] = False
        return torch.randn(1, S, 3), mask

    check_dynamic(Masks(), make, {"x": {1: "S"}, "mask": {1: "S"}}, SIZES, input_names=["x", "mask"])
