"""More `transformers` architectures (tiny configs, random weights): tract always;
Khronos NNEF where standard NNEF can express the model, else refused naming the op."""

from __future__ import annotations

import warnings

import pytest
import torch
import transformers as tf

from t2n.testing import check_export

V = 99


def _ids():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, V, (2, 7), generator=g)
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, 5:] = 0
    return ids, mask


def _decoder(cls, cfg_cls, **kw):
    return cls(cfg_cls(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, max_position_embeddings=64, use_cache=False,
                       pad_token_id=0, bos_token_id=1, eos_token_id=2, **kw))


def build(name):
    ids, mask = _ids()
    image = torch.randn(1, 3, 32, 32)
    if name == "gemma":
        return _decoder(tf.GemmaForCausalLM, tf.GemmaConfig, num_key_value_heads=2, head_dim=8), (ids,), {}
    if name == "gemma2":
        return _decoder(tf.Gemma2ForCausalLM, tf.Gemma2Config, num_key_value_heads=2, head_dim=8), (ids,), {}
    if name == "qwen3":
        return _decoder(tf.Qwen3ForCausalLM, tf.Qwen3Config, num_key_value_heads=2, head_dim=8), (ids,), {}
    if name == "phi3":
        return _decoder(tf.Phi3ForCausalLM, tf.Phi3Config, num_key_value_heads=2), (ids,), {}
    if name == "olmo":
        return _decoder(tf.OlmoForCausalLM, tf.OlmoConfig, num_key_value_heads=2), (ids,), {}
    if name == "gpt_neox":
        return tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(vocab_size=V, hidden_size=32, intermediate_size=64,
                                                      num_hidden_layers=2, num_attention_heads=4,
                                                      max_position_embeddings=64, use_cache=False)), (ids,), {}
    if name == "falcon":
        return tf.FalconForCausalLM(tf.FalconConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2,
                                                    num_attention_heads=4, use_cache=False)), (ids,), {}
    if name == "bloom":
        return tf.BloomForCausalLM(tf.BloomConfig(vocab_size=V, hidden_size=32, n_layer=2, n_head=4,
                                                  use_cache=False)), (ids,), dict(attention_mask=mask)
    if name == "opt":
        return tf.OPTForCausalLM(tf.OPTConfig(vocab_size=V, hidden_size=32, ffn_dim=64, num_hidden_layers=2,
                                              num_attention_heads=4, max_position_embeddings=64,
                                              word_embed_proj_dim=32, use_cache=False)), (ids,), \
            dict(attention_mask=mask)
    if name == "roberta":
        return tf.RobertaModel(tf.RobertaConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2,
                                                num_attention_heads=4, intermediate_size=64,
                                                max_position_embeddings=64)), (ids,), dict(attention_mask=mask)
    if name == "deberta_v2":
        return tf.DebertaV2Model(tf.DebertaV2Config(vocab_size=V, hidden_size=32, num_hidden_layers=2,
                                                    num_attention_heads=4, intermediate_size=64,
                                                    max_position_embeddings=64)), (ids,), dict(attention_mask=mask)
    if name == "bart":
        return tf.BartModel(tf.BartConfig(vocab_size=V, d_model=32, encoder_layers=1, decoder_layers=1,
                                          encoder_attention_heads=4, decoder_attention_heads=4,
                                          encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
                                          use_cache=False)), (ids,), dict(attention_mask=mask)
    if name == "t5":
        return tf.T5Model(tf.T5Config(vocab_size=V, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4,
                                      use_cache=False)), (ids,), dict(decoder_input_ids=ids[:, :4])
    if name == "clip_vision":
        return tf.CLIPVisionModel(tf.CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                                      num_attention_heads=4, image_size=16, patch_size=4)), \
            (torch.randn(1, 3, 16, 16),), {}
    if name == "convnext":
        return tf.ConvNextModel(tf.ConvNextConfig(hidden_sizes=[8, 16], depths=[1, 1], num_stages=2,
                                                  image_size=32)), (image,), {}
    if name == "swin":
        return tf.SwinModel(tf.SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1],
                                          num_heads=[2, 2], window_size=4)), (image,), {}
    if name == "segformer":
        return tf.SegformerModel(tf.SegformerConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                                                    hidden_sizes=[8, 16], num_attention_heads=[1, 2],
                                                    patch_sizes=[7, 3], strides=[4, 2])), (image,), {}
    if name == "mobilevit":
        return tf.MobileViTModel(tf.MobileViTConfig(image_size=32, hidden_sizes=[16, 16, 16],
                                                    neck_hidden_sizes=[8, 8, 16, 16, 16, 16, 32])), (image,), {}
    if name == "mamba":
        return tf.MambaModel(tf.MambaConfig(vocab_size=V, hidden_size=16, state_size=4, num_hidden_layers=2,
                                            use_cache=False)), (ids,), {}
    raise KeyError(name)


# models whose position ids or masks are integer arithmetic, which standard NNEF lacks
KHRONOS_REFUSES = {"roberta": "on i64", "deberta_v2": "on i64", "bloom": "on i64"}

MODELS = ["gemma", "gemma2", "qwen3", "phi3", "olmo", "gpt_neox", "falcon", "bloom", "opt", "roberta",
          "deberta_v2", "bart", "t5", "clip_vision", "convnext", "swin", "segformer", "mobilevit", "mamba"]


@pytest.mark.parametrize("name", MODELS)
def test_more_architectures(name):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, args, kwargs = build(name)
    check_export(model.eval(), args, kwargs=kwargs, khronos_refuses=KHRONOS_REFUSES.get(name, False))
