"""Families added after the sweep (issue #41's measurement). A tiny random model of each,
exported and run in tract, generates the 16 tokens ``transformers``' ``generate`` does:

- Qwen3.5 and Qwen3.5-MoE (gated delta-nets with split projections beside attention;
  rotary over three equal position axes), LaraMini (Qwen3.5's gated delta-net,
  transformers 5.25), OLMo-Hybrid (gated delta-nets with a projection each);
- LFM2, LFM2-MoE and LFM3 (gated short convolutions beside attention: a conv state only);
- Cohere Compass's text decoder (rotary over three equal position axes), dots.llm1,
  Youtu-LLM and AFMoE (attention only), in both cache forms.

Their tiny configurations are written here: the sweep's, from the configurations'
defaults, hold only recurrent layers, do not build, repeat one token, or (AFMoE) tie every
expert with zero-initialised routers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from t2n.errors import NotExpressibleError
from t2n.llm import export_llm, tract_greedy_generate
from t2n.llm.common.families import FAMILIES, PROVEN

from .tiny_models import reference_tokens

NEW_TOKENS = 16
_ATTENTION: dict[str, Any] = dict(vocab_size=96, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                  num_key_value_heads=2, max_position_embeddings=128, eos_token_id=None)
_GATED_DELTA: dict[str, Any] = dict(num_hidden_layers=4, layer_types=["linear_attention", "full_attention"] * 2,
                                    head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
                                    linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4)
_EXPERTS: dict[str, Any] = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                                shared_expert_intermediate_size=64)
_SHORT_CONV: dict[str, Any] = dict(num_hidden_layers=4, layer_types=["conv", "full_attention"] * 2, conv_L_cache=3,
                                   initializer_range=0.2)  # wide enough not to repeat one token

HYBRIDS = ("qwen3_5_text", "qwen3_5_moe_text", "qwen3_5", "qwen3_5_moe", "lara_mini", "olmo_hybrid", "lfm2", "lfm2_moe",
           "lfm3")
ATTENTION_ONLY = ("dots1", "youtu", "afmoe", "cohere_compass_text")


def _config(family: str) -> Any:
    import transformers as tf

    if family == "qwen3_5_text":
        return tf.Qwen3_5TextConfig(**_ATTENTION, **_GATED_DELTA)
    if family == "qwen3_5_moe_text":
        return tf.Qwen3_5MoeTextConfig(**_ATTENTION, **_GATED_DELTA, **_EXPERTS)
    if family == "qwen3_5":  # the multimodal configuration: its causal LM is the text decoder
        return tf.Qwen3_5Config(text_config=dict(**_ATTENTION, **_GATED_DELTA))
    if family == "qwen3_5_moe":
        return tf.Qwen3_5MoeConfig(text_config=dict(**_ATTENTION, **_GATED_DELTA, **_EXPERTS))
    if family == "lara_mini":  # Qwen3.5's gated delta-net (transformers 5.25 and later)
        if not hasattr(tf, "LaraMiniConfig"):
            pytest.skip(f"transformers {tf.__version__} has no LaraMini")
        return tf.LaraMiniConfig(**_ATTENTION, **_GATED_DELTA, initializer_range=0.2)  # not one token repeated
    if family == "olmo_hybrid":  # beta doubled (negative eigenvalues allowed), its default
        return tf.OlmoHybridConfig(**_ATTENTION, **{k: v for k, v in _GATED_DELTA.items() if k != "head_dim"},
                                   pad_token_id=0)
    if family == "lfm2":
        return tf.Lfm2Config(**_ATTENTION, **_SHORT_CONV)
    if family == "lfm2_moe":  # a dense layer, then experts
        return tf.Lfm2MoeConfig(**_ATTENTION, **_SHORT_CONV, num_dense_layers=1, num_experts=4, num_experts_per_tok=2,
                                moe_intermediate_size=32)
    if family == "lfm3":
        return tf.Lfm3Config(**_ATTENTION, **_SHORT_CONV, pad_token_id=0)
    if family == "dots1":  # a dense layer, then routed experts beside a shared one
        return tf.Dots1Config(**_ATTENTION, num_hidden_layers=2, first_k_dense_replace=1, n_routed_experts=4,
                              n_shared_experts=1, num_experts_per_tok=2, moe_intermediate_size=32)
    if family == "youtu":  # latent attention; initialised wide enough not to repeat one token
        return tf.YoutuConfig(**{**_ATTENTION, "num_key_value_heads": 4}, num_hidden_layers=2, kv_lora_rank=32,
                              q_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16,
                              bos_token_id=1, initializer_range=0.2, embedding_initializer_range=0.4)
    if family == "afmoe":  # sliding layers (a window of 4 tokens) and a global one; a dense layer, then experts
        return tf.AfmoeConfig(**_ATTENTION, num_hidden_layers=4, num_dense_layers=1, num_experts=4,
                              num_experts_per_tok=2, num_shared_experts=1, moe_intermediate_size=32, head_dim=16,
                              layer_types=["sliding_attention"] * 3 + ["full_attention"], sliding_window=4)
    if family == "cohere_compass_text":  # rotary over three equal position axes, a theta per layer type
        rope = {"rope_type": "default", "rope_theta": 10000.0}
        return tf.CohereCompassTextConfig(**_ATTENTION, num_hidden_layers=2, head_dim=16, bos_token_id=1,
                                          initializer_range=0.2,
                                          rope_parameters={"full_attention": rope, "sliding_attention": rope})
    raise KeyError(family)


def _tiny(family: str) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(_config(family)).eval()
    assert model.config.model_type == family or family in ("qwen3_5", "qwen3_5_moe")
    if family == "afmoe":  # its routers are initialised to zeros: every expert ties, which tract and
        _random_routers(model)  # PyTorch break differently; a trained router does not tie
    return model


def _random_routers(model: Any) -> None:
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for layer in model.model.layers:
            if hasattr(layer.mlp, "router"):
                gate = layer.mlp.router.gate.weight
                gate.copy_(torch.randn(gate.shape, generator=generator) * 0.5)
                layer.mlp.expert_bias.copy_(torch.randn(layer.mlp.expert_bias.shape, generator=generator) * 0.1)


def _prompt() -> torch.Tensor:
    return torch.randint(1, 96, (1, 5), generator=torch.Generator().manual_seed(3))


@pytest.mark.slow
@pytest.mark.parametrize("family", HYBRIDS)
def test_hybrid_family_generates_identically(family: str, tmp_path: Path) -> None:
    """Explicit cache: keys and values of the attention layers, the states of the others
    (Qwen3.5: conv and recurrent; LFM: conv only)."""
    model = _tiny(family)
    export_llm(model, tmp_path / "out")  # verified in tract at the traced sizes too
    modes = json.loads((tmp_path / "out" / "modes.json").read_text())
    kinds = {s["kind"] for s in modes["cache"]["recurrent_states"]}
    assert kinds == ({"conv"} if family.startswith("lfm") else {"conv", "recurrent"})
    assert modes["cache"]["kv_layers"] == [1, 3]
    prompt = _prompt()
    expected = reference_tokens(model, prompt, NEW_TOKENS)
    assert len(set(expected)) > 3  # the tiny model does not repeat one token
    assert tract_greedy_generate(tmp_path / "out", prompt, NEW_TOKENS) == expected
    assert FAMILIES[family].status == PROVEN


def test_hybrid_family_refuses_the_stateful_cache(tmp_path: Path) -> None:
    """Its states are replaced at each token: tract's stateful cache only grows."""
    with pytest.raises(NotExpressibleError, match="kv_cache='explicit'"):
        export_llm(_tiny("lfm2"), tmp_path / "out", kv_cache="stateful", verify=False)


@pytest.mark.slow
@pytest.mark.parametrize("form", ["explicit", "stateful"])
@pytest.mark.parametrize("family", ATTENTION_ONLY)
def test_attention_family_generates_identically(family: str, form: str, tmp_path: Path) -> None:
    model = _tiny(family)
    export_llm(model, tmp_path / "out", kv_cache=form)  # verified in tract at the traced sizes too
    prompt = _prompt()
    expected = reference_tokens(model, prompt, NEW_TOKENS)
    assert len(set(expected)) > 3
    assert tract_greedy_generate(tmp_path / "out", prompt, NEW_TOKENS) == expected
    assert FAMILIES[family].status == PROVEN
