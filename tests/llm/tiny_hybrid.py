"""Tiny random-init causal LMs (a few kB of weights each): hybrids (attention beside
linear-attention or state-space layers) and models with sliding windows."""

from __future__ import annotations

from typing import Any

import torch

HYBRID_FAMILIES = ("qwen3_next", "mamba", "falcon_h1", "jamba", "falcon_mamba", "mamba2", "bamba", "granitemoehybrid",
                   "nemotron_h", "zamba", "zamba2")

_COMMON = dict(vocab_size=96, eos_token_id=None)  # no end token: 16 tokens are always generated


def _config(family: str, **extra: Any) -> Any:
    import transformers as tf

    attention = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                     max_position_embeddings=128, **_COMMON)
    if family == "qwen3_next":
        linear = dict(linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
                      linear_value_head_dim=16, linear_conv_kernel_dim=4, num_hidden_layers=4,
                      layer_types=["linear_attention", "full_attention"] * 2)
        return tf.Qwen3NextConfig(**{"head_dim": 16, "num_experts": 0, **attention, **linear, **extra})
    if family == "mamba":
        return tf.MambaConfig(hidden_size=64, state_size=8, num_hidden_layers=2, intermediate_size=128,
                              conv_kernel=4, time_step_rank=8, initializer_range=0.5, **_COMMON, **extra)
    if family == "falcon_mamba":
        return tf.FalconMambaConfig(hidden_size=64, state_size=8, num_hidden_layers=2, intermediate_size=128,
                                    conv_kernel=4, time_step_rank=8, initializer_range=0.5, **_COMMON, **extra)
    if family == "mamba2":
        return tf.Mamba2Config(hidden_size=64, num_heads=8, head_dim=16, expand=2, state_size=8, n_groups=2,
                               num_hidden_layers=2, conv_kernel=4, chunk_size=16, initializer_range=0.5,
                               **_COMMON, **extra)
    if family == "falcon_h1":
        return tf.FalconH1Config(num_hidden_layers=2, mamba_d_ssm=64, mamba_n_heads=4, mamba_d_head=16,
                                 mamba_d_state=8, mamba_d_conv=4, mamba_n_groups=1, mamba_chunk_size=16,
                                 **attention, **extra)
    if family == "jamba":
        return tf.JambaConfig(**{"num_hidden_layers": 4, "num_experts": 1, "attn_layer_period": 2,
                                 "attn_layer_offset": 1, "mamba_d_state": 8, "mamba_d_conv": 4, "mamba_expand": 2,
                                 "mamba_dt_rank": 8, **attention, **extra})
    mamba2 = dict(mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_n_heads=8, mamba_d_head=16,
                  mamba_n_groups=1, mamba_chunk_size=16)
    if family == "bamba":
        return tf.BambaConfig(**{"num_hidden_layers": 2, "attn_layer_indices": [1], **mamba2, **attention, **extra})
    if family == "granitemoehybrid":  # with experts: they and the shared MLP beside them
        return tf.GraniteMoeHybridConfig(**{"num_hidden_layers": 2, "layer_types": ["mamba", "attention"],
                                            "num_local_experts": 4, "num_experts_per_tok": 2,
                                            "shared_intermediate_size": 128, **mamba2, **attention, **extra})
    if family == "nemotron_h":  # Mamba-2, attention and MLP blocks
        return tf.NemotronHConfig(**{"layers_block_type": ["mamba", "attention", "mlp"], "ssm_state_size": 8,
                                     "mamba_num_heads": 8, "mamba_head_dim": 16, "n_groups": 1, "conv_kernel": 4,
                                     "expand": 2, "chunk_size": 16, "head_dim": 16, **attention, **extra})
    if family == "zamba":  # multi-head Mamba layers; attention shared by the hybrid layers (2 and 4)
        return tf.ZambaConfig(**{"num_hidden_layers": 5, "attn_layer_period": 2, "attn_layer_offset": 1,
                                 "n_mamba_heads": 2, "mamba_d_state": 8, "mamba_d_conv": 4, "mamba_expand": 2,
                                 "mamba_dt_rank": 8, "attention_head_dim": 32, "initializer_range": 0.2,
                                 **attention, **extra})
    if family == "zamba2":  # Mamba-2 layers; one attention block shared by the hybrid layers (1 and 3)
        return tf.Zamba2Config(**{"num_hidden_layers": 4, "layers_block_type": ["mamba", "hybrid"] * 2,
                                  "mamba_d_state": 8, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_ngroups": 1,
                                  "n_mamba_heads": 8, "chunk_size": 16, "num_mem_blocks": 1, "use_mem_rope": True,
                                  "initializer_range": 0.15, **attention, **extra})
    raise KeyError(family)


def tiny_hybrid(family: str, seed: int = 0, **extra: Any) -> torch.nn.Module:
    """A tiny model of ``family`` in eval mode (seeded: the same weights each call)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(_config(family, **extra)).eval()


def tiny_qwen3_next_128() -> torch.nn.Module:
    """Qwen3-Next with linear-attention heads of width 128 (the width tract's
    ``tract_transformers_gdn_recurrent`` computes)."""
    return tiny_hybrid("qwen3_next", linear_num_key_heads=1, linear_num_value_heads=2, linear_key_head_dim=128,
                       linear_value_head_dim=128, num_hidden_layers=2, layer_types=["linear_attention", "full_attention"])


def tiny_windowed(family: str) -> torch.nn.Module:
    """A tiny model with 4-token sliding windows: ``gemma3`` (a windowed layer and a
    global one) or ``mistral`` (every layer windowed)."""
    import transformers as tf

    common = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                  vocab_size=96, num_hidden_layers=2, max_position_embeddings=128, sliding_window=4)
    torch.manual_seed(0)
    if family == "gemma3":
        return tf.Gemma3ForCausalLM(tf.Gemma3TextConfig(
            head_dim=16, layer_types=["sliding_attention", "full_attention"], **common)).eval()
    if family == "mistral":
        return tf.MistralForCausalLM(tf.MistralConfig(**common)).eval()
    raise KeyError(family)
