"""reify_sdpa_operator and upsample_with_debox: tract's own ops where the target version
has them, checked numerically in tract; the decomposed form elsewhere."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import t2n
from t2n.backends.tract.passes import DeboxUpsample, ReifySdpa
from t2n.ir import Graph

Q = torch.randn(1, 2, 5, 8)
K = torch.randn(1, 2, 6, 8)
V = torch.randn(1, 2, 6, 8)
SDPA = t2n.TractNNEF.latest(reify_sdpa_operator=True)


class Attention(nn.Module):
    def __init__(self, causal: bool = False, scale: float | None = None) -> None:
        super().__init__()
        self.causal, self.scale = causal, scale

    def forward(self, q, k, v, mask=None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal, scale=self.scale)


def dead_row_mask() -> torch.Tensor:
    keep = torch.rand(5, 6) > 0.3
    keep[2] = False  # a query that may attend to nothing: PyTorch gives zeros there
    return keep


@pytest.mark.parametrize("module, args", [
    (Attention(), (Q, K, V)),
    (Attention(scale=0.2), (Q, K, V)),
    (Attention(), (Q, K, V, torch.randn(5, 6))),
    (Attention(), (Q, K, V, torch.randn(1, 2, 5, 6))),
    (Attention(), (Q, K, V, dead_row_mask())),
    (Attention(causal=True), (Q, Q, Q)),
    (Attention(), (Q[0], K[0], V[0])),  # rank 3
], ids=["plain", "scale", "float-mask", "float-mask-4d", "bool-mask-dead-row", "causal", "rank3"])
def test_attention_is_one_tract_op_and_right(module, args):
    artifact = t2n.compile(module, args, SDPA)
    assert artifact.graph_nnef.count("tract_transformers_sdpa(") == 1
    assert "extension tract_registry tract_transformers;" in artifact.graph_nnef
    assert "softmax" not in artifact.graph_nnef
    assert artifact.stats["pass_stats"]["reify-sdpa.attentions"] == 1
    assert artifact.check().ok


def test_attention_with_dynamic_length():
    artifact = t2n.compile(Attention(causal=True), (Q, Q, Q), SDPA, input_names=["q", "k", "v"],
                           dynamic_axes={"q": {2: "S"}, "k": {2: "S"}, "v": {2: "S"}})
    assert "tract_transformers_sdpa(" in artifact.graph_nnef
    assert artifact.check().ok
    longer = torch.randn(1, 2, 9, 8)
    expected = F.scaled_dot_product_attention(longer, longer, longer, is_causal=True)
    artifact.check(inputs=[longer.numpy()] * 3, expected=[expected.numpy()])


def test_every_layer_of_an_encoder():
    layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    artifact = t2n.compile(encoder, (torch.randn(2, 7, 16),), SDPA)
    assert artifact.graph_nnef.count("tract_transformers_sdpa(") == 2
    assert artifact.check().ok


def test_older_tract_keeps_the_decomposed_form():
    artifact = t2n.compile(Attention(), (Q, K, V), t2n.TractNNEF("0.21.0", reify_sdpa_operator=True))
    assert "tract_transformers_sdpa" not in artifact.graph_nnef and "softmax(" in artifact.graph_nnef
    assert artifact.check().ok


def test_off_by_default():
    artifact = t2n.compile(Attention(), (Q, K, V), t2n.TractNNEF.latest())
    assert "tract_transformers_sdpa" not in artifact.graph_nnef


def test_softmax_read_elsewhere_is_not_rewritten():
    class Weights(nn.Module):
        def forward(self, q, k, v):
            probs = torch.softmax(q @ k.transpose(-1, -2) * 0.5, dim=-1)
            return probs @ v, probs

    artifact = t2n.compile(Weights(), (Q, K, V), SDPA)
    assert "tract_transformers_sdpa" not in artifact.graph_nnef
    assert artifact.check().ok


class Up(nn.Module):
    """Upsampling of a pooled feature map (a decoder's skip path), or of a conv's output."""

    def __init__(self, dims: int, after_conv: bool = False, **how: object) -> None:
        super().__init__()
        conv = nn.Conv1d if dims == 1 else nn.Conv2d
        pool = nn.MaxPool1d if dims == 1 else nn.MaxPool2d
        self.conv = conv(3, 4, 3, padding=1)
        self.pool = pool(1)
        self.up = nn.Upsample(**how)  # type: ignore[arg-type]
        self.after_conv = after_conv

    def forward(self, x):
        y = torch.relu(self.conv(x))
        return self.up(y if self.after_conv else self.pool(y)) - 0.5


DEBOX = t2n.TractNNEF.latest(upsample_with_debox=True)


@pytest.mark.parametrize("dims, how, boxes", [
    (2, {"scale_factor": 2}, 1),
    (2, {"scale_factor": (3, 2)}, 1),
    (1, {"scale_factor": 4}, 1),
    (2, {"size": (10, 18)}, 1),
])
def test_nearest_upsampling_is_debox_and_exact(dims, how, boxes):
    x = torch.randn(1, 3, *([5, 6][:dims] if dims == 2 else [7]))
    artifact = t2n.compile(Up(dims, mode="nearest", **how).eval(), (x,), DEBOX)
    assert artifact.graph_nnef.count(" debox(") == boxes and "tile(" not in artifact.graph_nnef
    assert artifact.check().ok


@pytest.mark.parametrize("factor", [2, (2, 3)])
def test_debox_is_exact(factor):
    """Every output is one input times one: equal bits, not just close."""
    up = nn.Upsample(scale_factor=factor, mode="nearest")
    artifact = t2n.compile(up, (torch.randn(2, 3, 4, 5),), DEBOX)
    assert artifact.graph_nnef.count(" debox(") == 1
    assert artifact.check("exact").ok


def test_debox_follows_dynamic_sizes():
    artifact = t2n.compile(Up(2, scale_factor=2, mode="nearest").eval(), (torch.randn(1, 3, 5, 6),), DEBOX,
                           dynamic_axes={"input_0": {2: "H", 3: "W"}})
    assert artifact.graph_nnef.count(" debox(") == 1
    x = torch.randn(1, 3, 4, 9)
    module = Up(2, scale_factor=2, mode="nearest").eval()
    artifact = t2n.compile(module, (torch.randn(1, 3, 5, 6),), DEBOX, dynamic_axes={"input_0": {2: "H", 3: "W"}})
    artifact.check(inputs=[x.numpy()], expected=[module(x).detach().numpy()])


@pytest.mark.parametrize("how", [{"scale_factor": 1.5, "mode": "nearest"}, {"scale_factor": 2, "mode": "bilinear"}])
def test_other_upsamplings_keep_their_form(how):
    artifact = t2n.compile(Up(2, **how).eval(), (torch.randn(1, 3, 5, 6),), DEBOX)
    assert " debox(" not in artifact.graph_nnef
    assert artifact.check().ok


@pytest.mark.parametrize("dims", [1, 2])
def test_debox_does_not_follow_a_convolution(dims):
    """tract 0.23.9 cannot prepare conv (→ relu) → debox (its optimiser fuses them
    wrongly): the tile form is kept there, and the artifact runs."""
    x = torch.randn(1, 3, *([5, 6] if dims == 2 else [7]))
    artifact = t2n.compile(Up(dims, after_conv=True, scale_factor=2, mode="nearest").eval(), (x,), DEBOX)
    assert " debox(" not in artifact.graph_nnef
    assert artifact.check().ok


def test_debox_needs_tract_0_23():
    artifact = t2n.compile(Up(2, scale_factor=2, mode="nearest").eval(), (torch.randn(1, 3, 5, 6),),
                           t2n.TractNNEF("0.22.0", upsample_with_debox=True))
    assert " debox(" not in artifact.graph_nnef
    assert artifact.check().ok


@pytest.mark.parametrize("pass_", [ReifySdpa(), DeboxUpsample()])
def test_passes_report_no_change_on_graphs_without_their_pattern(pass_):
    result = pass_(Graph())
    assert result.modified is False and not result.stats


@pytest.mark.slow  # importing transformers and tracing Llama: about 10 s
def test_llama_attention_with_grouped_heads_and_dynamic_length():
    """transformers' Llama (SDPA attention, 2 kv heads for 4 query heads, additive causal
    mask): every layer's attention becomes one tract op, right at another length too."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    config._attn_implementation = "sdpa"
    llama = LlamaForCausalLM(config).eval()

    class Logits(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.llama = llama

        def forward(self, ids):
            return self.llama(input_ids=ids, use_cache=False).logits

    model = Logits().eval()
    artifact = t2n.compile(model, (torch.randint(0, 64, (1, 7)),), SDPA, input_names=["ids"],
                           dynamic_axes={"ids": {1: "S"}})
    assert artifact.graph_nnef.count("tract_transformers_sdpa(") == 2
    assert artifact.check().ok
    ids = torch.randint(0, 64, (1, 12))
    with torch.no_grad():
        expected = model(ids).numpy()
    assert artifact.check(inputs=[ids.numpy()], expected=[expected]).ok
