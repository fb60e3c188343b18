"""`transformers` models over a dynamic sequence length: exported once, run in tract at
several lengths (inputs of that length, and with the symbol fixed), against PyTorch."""

from __future__ import annotations

import warnings

import pytest
import torch
import transformers as tf

from t2n.passes.dynamic_axes import BakedSizeWarning
from t2n.testing import check_dynamic

V = 99
SIZES = [{"S": 5}, {"S": 9}, {"S": 17}]


def build(name):
    if name == "llama":
        return tf.LlamaForCausalLM(tf.LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=64,
                                                  num_hidden_layers=2, num_attention_heads=4,
                                                  num_key_value_heads=2, max_position_embeddings=64,
                                                  use_cache=False))
    if name == "qwen2":
        return tf.Qwen2ForCausalLM(tf.Qwen2Config(vocab_size=V, hidden_size=32, intermediate_size=64,
                                                  num_hidden_layers=2, num_attention_heads=4,
                                                  num_key_value_heads=2, max_position_embeddings=64,
                                                  use_cache=False))
    if name == "gpt2":
        return tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                                use_cache=False))
    return tf.BertModel(tf.BertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      intermediate_size=64, max_position_embeddings=64))


def test_audio_length_is_dynamic_through_the_conv_feature_extractor():
    """wav2vec2: the frame count is a nest of floor divisions of the sample count."""
    torch.manual_seed(0)
    cfg = tf.Wav2Vec2Config(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
                            num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = tf.Wav2Vec2Model(cfg).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error", BakedSizeWarning)
        check_dynamic(model, lambda T: (torch.randn(1, T),), {"audio": {1: "T"}},
                      [{"T": 200}, {"T": 361}, {"T": 683}], input_names=["audio"])


@pytest.mark.parametrize("name", ["llama", "qwen2", "gpt2", "bert"])
def test_sequence_length_is_dynamic(name):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build(name).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error", BakedSizeWarning)  # nothing may be baked in
        check_dynamic(model, lambda S: (torch.randint(0, V, (1, S), generator=torch.Generator().manual_seed(S)),),
                      {"ids": {1: "S"}}, SIZES, input_names=["ids"])
