"""Real `transformers` architectures (tiny configs, random weights) in tract and the
Khronos interpreter, every output compared with PyTorch at the approximate tolerance."""

from __future__ import annotations

import warnings

import pytest
import torch
import transformers as tf

from t2n.testing import check_export

V = 99


def ids_and_mask() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, V, (2, 7), generator=g)
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, 5:] = 0  # a padded second sequence
    return ids, mask


def decoder_config(cls, **kw):
    return cls(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
               num_attention_heads=4, max_position_embeddings=64, use_cache=False, **kw)


def build(name: str, attn: str):
    ids, mask = ids_and_mask()
    if name == "bert":
        cfg = tf.BertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=64, max_position_embeddings=64)
        return tf.BertModel, cfg, (ids,), dict(attention_mask=mask, token_type_ids=(ids > 50).long())
    if name == "gpt2":
        cfg = tf.GPT2Config(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64, use_cache=False)
        return tf.GPT2LMHeadModel, cfg, (ids,), dict(attention_mask=mask)
    if name == "llama":
        return tf.LlamaForCausalLM, decoder_config(tf.LlamaConfig, num_key_value_heads=2), (ids,), {}
    if name == "qwen2":
        return tf.Qwen2ForCausalLM, decoder_config(tf.Qwen2Config, num_key_value_heads=2), (ids,), \
            dict(attention_mask=mask)
    if name == "mistral":
        return tf.MistralForCausalLM, decoder_config(tf.MistralConfig, num_key_value_heads=2), (ids,), {}
    if name == "phi":
        return tf.PhiForCausalLM, decoder_config(tf.PhiConfig), (ids,), {}
    if name == "t5_encoder":
        cfg = tf.T5Config(vocab_size=V, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4)
        return tf.T5EncoderModel, cfg, (ids,), dict(attention_mask=mask)
    if name == "whisper_encoder":
        cfg = tf.WhisperConfig(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=1,
                               encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                               decoder_ffn_dim=64, num_mel_bins=8, max_source_positions=16,
                               max_target_positions=16, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                               decoder_start_token_id=1)
        return "whisper", cfg, (torch.randn(1, 8, 32),), {}
    if name == "wav2vec2":
        cfg = tf.Wav2Vec2Config(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2),
                                conv_kernel=(10, 3), num_conv_pos_embeddings=8,
                                num_conv_pos_embedding_groups=4)
        return tf.Wav2Vec2Model, cfg, (torch.randn(1, 400),), {}
    if name == "vit":
        cfg = tf.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                           image_size=16, patch_size=4, num_channels=3)
        return tf.ViTModel, cfg, (torch.randn(1, 3, 16, 16),), {}
    raise KeyError(name)


def instantiate(name: str, attn: str = "eager"):
    cls, cfg, args, kwargs = build(name, attn)
    cfg._attn_implementation = attn
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = tf.WhisperModel(cfg).get_encoder() if cls == "whisper" else cls(cfg)
    return model.eval(), args, kwargs


MODELS = ["bert", "gpt2", "llama", "qwen2", "mistral", "phi", "t5_encoder", "whisper_encoder",
          "wav2vec2", "vit"]


@pytest.mark.parametrize("name", MODELS)
def test_architecture_in_tract_and_khronos(name):
    model, args, kwargs = instantiate(name)
    res = check_export(model, args, kwargs=kwargs)
    assert set(res.reports) == {"tract", "khronos"}


@pytest.mark.parametrize("name", ["bert", "llama", "vit"])
def test_sdpa_attention_implementation(name):
    model, args, kwargs = instantiate(name, "sdpa")
    check_export(model, args, kwargs=kwargs, targets=("tract",))


@pytest.mark.parametrize("name", ["llama", "gpt2", "bert", "qwen2"])
def test_half_precision(name):
    model, args, kwargs = instantiate(name)
    model = model.half()
    args = tuple(a.half() if a.is_floating_point() else a for a in args)
    # f16 tolerance (atol 1e-3 / rtol 5e-3); the Khronos interpreter's f16 support is partial
    check_export(model, args, kwargs=kwargs, targets=("tract",))
