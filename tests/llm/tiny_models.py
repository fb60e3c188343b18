"""Tiny random-init causal LMs of several families (a few kB of weights each)."""

from __future__ import annotations

from typing import Any

import torch

COMMON = dict(vocab_size=96, num_hidden_layers=2, max_position_embeddings=128)


def _llama_like(config_cls: Any, model_cls: Any, **extra: Any) -> torch.nn.Module:
    config = config_cls(**{"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
                           "num_key_value_heads": 2, **COMMON, **extra})
    return model_cls(config)


MOE: dict[str, Any] = dict(num_experts_per_tok=2, intermediate_size=32, bos_token_id=None, eos_token_id=None)
"""Mixture-of-experts families: 4 experts of 32 hidden units, 2 chosen per token; no
end-of-text token (generate would keep it from being chosen before 16 tokens)."""


def _moe_builders(tf: Any) -> dict[str, Any]:
    def llama_like(config_cls: Any, model_cls: Any, **extra: Any) -> torch.nn.Module:
        return _llama_like(config_cls, model_cls, **{**MOE, **extra})

    return {
        "mixtral": lambda: llama_like(tf.MixtralConfig, tf.MixtralForCausalLM, num_local_experts=4),
        "qwen2_moe": lambda: llama_like(tf.Qwen2MoeConfig, tf.Qwen2MoeForCausalLM, num_experts=4,
                                        moe_intermediate_size=32, shared_expert_intermediate_size=64),
        "qwen3_moe": lambda: llama_like(tf.Qwen3MoeConfig, tf.Qwen3MoeForCausalLM, num_experts=4,
                                        moe_intermediate_size=32, head_dim=16, norm_topk_prob=True),
        "olmoe": lambda: llama_like(tf.OlmoeConfig, tf.OlmoeForCausalLM, num_experts=4, pad_token_id=0),
        "granitemoe": lambda: llama_like(tf.GraniteMoeConfig, tf.GraniteMoeForCausalLM, num_local_experts=4),
        "gpt_oss": lambda: llama_like(tf.GptOssConfig, tf.GptOssForCausalLM, num_local_experts=4, head_dim=16,
                                      sliding_window=4, rope_parameters={"rope_type": "default",
                                                                         "rope_theta": 10000.0}),
        "deepseek_v3": lambda: llama_like(tf.DeepseekV3Config, tf.DeepseekV3ForCausalLM, n_routed_experts=4,
                                          moe_intermediate_size=32, n_group=2, topk_group=1, first_k_dense_replace=1,
                                          kv_lora_rank=16, q_lora_rank=24, qk_rope_head_dim=8,
                                          qk_nope_head_dim=8, v_head_dim=16, num_key_value_heads=4),
    }


MOE_FAMILIES = ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "granitemoe", "gpt_oss", "deepseek_v3")


def tiny_model(family: str, seed: int = 0) -> torch.nn.Module:
    """A tiny model of ``family`` in eval mode (seeded: the same weights each call)."""
    import transformers as tf

    torch.manual_seed(seed)
    builders = {
        "llama": lambda: _llama_like(tf.LlamaConfig, tf.LlamaForCausalLM),
        "qwen2": lambda: _llama_like(tf.Qwen2Config, tf.Qwen2ForCausalLM),
        "qwen3": lambda: _llama_like(tf.Qwen3Config, tf.Qwen3ForCausalLM, head_dim=16),
        "mistral": lambda: _llama_like(tf.MistralConfig, tf.MistralForCausalLM),
        "phi3": lambda: _llama_like(tf.Phi3Config, tf.Phi3ForCausalLM, pad_token_id=0),
        "olmo": lambda: _llama_like(tf.OlmoConfig, tf.OlmoForCausalLM, pad_token_id=0),
        "gpt2": lambda: tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=96, n_embd=64, n_layer=2, n_head=4,
                                                         n_positions=128)),
        "gemma2": lambda: _llama_like(tf.Gemma2Config, tf.Gemma2ForCausalLM, head_dim=16, sliding_window=4),
        "gemma3": lambda: _llama_like(tf.Gemma3TextConfig, tf.Gemma3ForCausalLM, head_dim=16, sliding_window=4),
        "gpt_neox": lambda: tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(
            vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, max_position_embeddings=128)),
        "gptj": lambda: tf.GPTJForCausalLM(tf.GPTJConfig(vocab_size=96, n_embd=64, n_layer=2, n_head=4,
                                                         n_positions=128, rotary_dim=8, bos_token_id=0,
                                                         eos_token_id=1)),
        **_moe_builders(tf),
    }
    return builders[family]().eval()


def reference_tokens(model: torch.nn.Module, prompt: torch.Tensor, count: int) -> list[int]:
    """``transformers``' greedy continuation of ``prompt``, exactly ``count`` tokens."""
    with torch.no_grad():
        out = model.generate(prompt, max_new_tokens=count, min_new_tokens=count, do_sample=False,
                             attention_mask=torch.ones_like(prompt), pad_token_id=0)
    return [int(t) for t in out[0, prompt.shape[1]:]]
