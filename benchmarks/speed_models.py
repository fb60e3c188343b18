"""The models of the artifact-speed benchmark, each with its example inputs.

This module imports only torch (and ``transformers`` for the two transformer models), not
t2n: the other exporter's virtual environment imports it too, builds the same
architecture and loads the weights t2n's side saved, so that every exporter compiles
the very same model.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

Case = tuple[nn.Module, tuple[torch.Tensor, ...]]


class FirstOutput(nn.Module):
    """The first output of a recurrent layer or a transformers model (the tensor users read)."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        out = self.inner(*args)
        first: torch.Tensor = out[0] if isinstance(out, tuple) else out.logits if hasattr(out, "logits") \
            else out.last_hidden_state
        return first


class Upsample(nn.Module):
    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mode == "bilinear":
            return F.interpolate(x, size=(256, 256), mode="bilinear", align_corners=False)
        return F.interpolate(x, size=(256, 256), mode=self.mode)


class CumSum(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=1)


class MaskedAttention(nn.Module):
    """Causal attention that also skips padded keys (``keep`` is False there)."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        causal = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        return F.scaled_dot_product_attention(q, k, v, attn_mask=causal & keep[:, None, None, :])


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def lstm() -> Case:
    return FirstOutput(nn.LSTM(64, 128, num_layers=2, bidirectional=True, batch_first=True)), \
        (torch.randn(1, 200, 64, generator=_gen()),)


def gru() -> Case:
    return FirstOutput(nn.GRU(64, 128, num_layers=2, batch_first=True)), (torch.randn(1, 200, 64, generator=_gen()),)


def upsample(mode: str) -> Callable[[], Case]:
    def build() -> Case:
        return Upsample(mode), (torch.randn(1, 16, 64, 64, generator=_gen()),)
    return build


def cumsum() -> Case:
    return CumSum(), (torch.randn(4, 1000, 64, generator=_gen()),)


def convnet() -> Case:
    def block(i: int, o: int) -> list[nn.Module]:
        return [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(), nn.MaxPool2d(2)]
    net = nn.Sequential(*block(3, 32), *block(32, 64), *block(64, 128), *block(128, 256),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 1000))
    return net.eval(), (torch.randn(1, 3, 224, 224, generator=_gen()),)


def llama() -> Case:
    import transformers as tf

    cfg = tf.LlamaConfig(vocab_size=1000, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                         num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=256,
                         use_cache=False)
    cfg._attn_implementation = "eager"
    ids = torch.randint(0, 1000, (1, 128), generator=_gen())
    return FirstOutput(tf.LlamaForCausalLM(cfg)).eval(), (ids, torch.ones(1, 128, dtype=torch.long))


def bert() -> Case:
    import transformers as tf

    cfg = tf.BertConfig(vocab_size=1000, hidden_size=256, num_hidden_layers=4, num_attention_heads=8,
                        intermediate_size=1024, max_position_embeddings=256)
    cfg._attn_implementation = "eager"
    return FirstOutput(tf.BertModel(cfg)).eval(), (torch.randint(0, 1000, (1, 128), generator=_gen()),)


def attention() -> Case:
    g = _gen()
    keep = torch.ones(1, 128, dtype=torch.bool)
    keep[:, 100:] = False
    return MaskedAttention(), (torch.randn(1, 8, 128, 64, generator=g), torch.randn(1, 8, 128, 64, generator=g),
                               torch.randn(1, 8, 128, 64, generator=g), keep)


MODELS: dict[str, Callable[[], Case]] = {
    "lstm (2 layers, bidirectional, 200 steps)": lstm,
    "gru (2 layers, 200 steps)": gru,
    "upsample bilinear 64²→256²": upsample("bilinear"),
    "upsample nearest 64²→256²": upsample("nearest"),
    "cumsum over 1000 steps": cumsum,
    "convnet 224²": convnet,
    "llama (4 layers, 128 tokens)": llama,
    "bert (4 layers, 128 tokens)": bert,
    "attention with masks (128)": attention,
}
"""Row name → the model (random weights, seed 0 where the caller sets it) and its inputs."""


def build(name: str) -> Case:
    """The model and inputs of row ``name``, with the weights of ``torch.manual_seed(0)``."""
    torch.manual_seed(0)
    model, args = MODELS[name]()
    return model.eval(), args
