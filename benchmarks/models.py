"""The models the benchmarks export.

* ``llama``: a random-init ``transformers`` ``LlamaForCausalLM`` (hidden 2048,
  intermediate 5632, 16 layers, 16 heads, 4 kv heads, vocab 32000: 0.85 B params).
* ``standin``: a Llama-shaped model built only from ops every t2n build lowers (a
  one-hot product for the embedding, RMSNorm from pow/mean/rsqrt, grouped-query
  attention from matmul/softmax/expand, SiLU-gated MLP, untied LM head), with the same
  parameter names, count and bytes, so that serializer and memory figures are those
  of the real model. It is used when t2n cannot yet lower the real Llama (the missing
  ops are reported). One difference: its embedding table is stored transposed
  (hidden x vocab, a ``Linear`` applied to one-hot rows), because PyTorch's CPU f16
  matmul is about 100x slower with the table the other way round, which would make
  the trace of the f16 model measure a PyTorch kernel rather than t2n.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

LLAMA = dict(hidden=2048, intermediate=5632, layers=16, heads=16, kv_heads=4, vocab=32000)
SEQ = 8


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    def __init__(self, d: int, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.h, self.kv, self.hd = heads, kv_heads, d // heads
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.v_proj = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q = self.q_proj(x).view(b, s, self.h, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv, self.hd).transpose(1, 2)
        r = self.h // self.kv
        k = k[:, :, None].expand(b, self.kv, r, s, self.hd).reshape(b, self.h, s, self.hd)
        v = v[:, :, None].expand(b, self.kv, r, s, self.hd).reshape(b, self.h, s, self.hd)
        a = torch.softmax(q @ k.transpose(2, 3) / math.sqrt(self.hd), dim=-1) @ v
        return self.o_proj(a.transpose(1, 2).reshape(b, s, d))


class MLP(nn.Module):
    def __init__(self, d: int, f: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, d: int, f: int, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(d)
        self.self_attn = Attention(d, heads, kv_heads)
        self.post_attention_layernorm = RMSNorm(d)
        self.mlp = MLP(d, f)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    def __init__(self, hidden: int, intermediate: int, layers: int, heads: int, kv_heads: int,
                 vocab: int) -> None:
        super().__init__()
        self.embed_tokens = nn.Linear(vocab, hidden, bias=False)  # hidden x vocab: see the docstring
        self.layers = nn.ModuleList(Layer(hidden, intermediate, heads, kv_heads) for _ in range(layers))
        self.norm = RMSNorm(hidden)


class StandIn(nn.Module):
    """Llama-shaped, parameter for parameter (names as in transformers' Llama)."""

    def __init__(self, hidden: int, intermediate: int, layers: int, heads: int, kv_heads: int,
                 vocab: int) -> None:
        super().__init__()
        self.model = Body(hidden, intermediate, layers, heads, kv_heads, vocab)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, one_hot: torch.Tensor) -> torch.Tensor:
        x = self.model.embed_tokens(one_hot)  # the embedding lookup, as a product with one-hot rows
        for layer in self.model.layers:
            x = layer(x)
        return self.lm_head(self.model.norm(x))


def _init_(model: nn.Module) -> None:
    """Fast random init (normal, std 0.02; norms at 1), in place, tensor by tensor."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02)


def llama_config(layers: int | None = None, **overrides: Any) -> Any:
    from transformers import LlamaConfig

    c = dict(LLAMA, **overrides)
    return LlamaConfig(
        hidden_size=c["hidden"], intermediate_size=c["intermediate"],
        num_hidden_layers=layers if layers is not None else c["layers"],
        num_attention_heads=c["heads"], num_key_value_heads=c["kv_heads"],
        vocab_size=c["vocab"], max_position_embeddings=256, tie_word_embeddings=False,
    )


def build(kind: str, *, dtype: torch.dtype = torch.float32, device: str = "cpu",
          layers: int | None = None, small: bool = False) -> nn.Module:
    """A model of ``kind`` ("llama" or "standin"); ``small`` gives a tiny one of the
    same architecture (for probing and tests); ``device="meta"`` allocates nothing."""
    dims = dict(LLAMA)
    if small:
        dims.update(hidden=64, intermediate=128, layers=2, heads=4, kv_heads=2, vocab=100)
    if layers is not None:
        dims["layers"] = layers
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            if kind == "llama":
                from transformers import LlamaForCausalLM

                cfg = llama_config(**{k: dims[k] for k in dims})
                cfg.use_cache = False
                model: nn.Module = LlamaForCausalLM(cfg)
            elif kind == "standin":
                model = StandIn(**dims)
            else:
                raise ValueError(kind)
    finally:
        torch.set_default_dtype(previous)
    if device != "meta":
        _init_(model)
    return model.eval()


def example_args(kind: str, model: nn.Module, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    vocab = model.lm_head.out_features  # type: ignore[union-attr]
    ids = torch.arange(SEQ).reshape(1, SEQ) % vocab
    if kind == "llama":
        return (ids,)
    dtype = model.lm_head.weight.dtype  # type: ignore[union-attr]
    return (F.one_hot(ids, vocab).to(dtype),)


def materialize_buffers(kind: str, model: nn.Module) -> None:
    """Non-persistent buffers (not in checkpoints) of a meta-device model, computed on
    the CPU: for Llama, the rotary frequencies."""
    if kind == "llama":
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

        rope = model.model.rotary_emb  # type: ignore[union-attr]
        model.model.rotary_emb = LlamaRotaryEmbedding(config=rope.config)  # type: ignore[union-attr]


def unique_tensors(model: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """Parameters and persistent buffers, each tensor once, as in a state dict."""
    seen: set[int] = set()
    for name, t in model.state_dict(keep_vars=True).items():
        if id(t) not in seen:
            seen.add(id(t))
            yield name, t.detach()


def weight_bytes(model: nn.Module) -> int:
    return sum(t.numel() * t.element_size() for _, t in unique_tensors(model))


def probe_llama() -> str | None:
    """None if t2n lowers a tiny Llama of the same architecture; else why not."""
    import t2n

    model = build("llama", small=True)
    try:
        t2n.compile(model, example_args("llama", model))
    except Exception as exc:  # reported as is
        ops = getattr(exc, "ops", None)
        if ops:
            return "t2n cannot lower: " + ", ".join(ops)
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    return None
