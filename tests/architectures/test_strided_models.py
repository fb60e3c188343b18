"""`transformers` models whose export depends on PyTorch's memory semantics or on sizes
computed from buffers (tiny configs, random weights), in tract against PyTorch:

* Longformer and LED chunk their attention with ``as_strided`` over views of the query
  and key projections (a transpose then a reshape that stays a view): the windows are
  read from the projection's memory, not from the view laid out row-major. Weights are
  drawn larger than the default (``initializer_range=0.5``) so that attention is not
  uniform and a wrong window shows in the output.
* EnCodec's and Mimi's padded convolutions compute their padding from int64 buffers and
  the length: it folds to numbers at export (codes exact, audio close).
* DPT's depth head concatenates the CLS token, broadcast, to every patch before a linear
  layer: tract 0.23.9 could not load that broadcast read by a matrix product.
"""

from __future__ import annotations

import pytest
import torch
import transformers as tf
from torch import nn

from t2n.testing import check_export

pytestmark = pytest.mark.slow

V = 99


def _ids(n: int = 16) -> torch.Tensor:
    return torch.randint(3, V, (1, n), generator=torch.Generator().manual_seed(0))


def _longformer_config(**kw: object) -> tf.LongformerConfig:
    return tf.LongformerConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=64, attention_window=4, max_position_embeddings=64,
                               pad_token_id=1, initializer_range=0.5, **kw)


def test_longformer_sliding_window_attention() -> None:
    torch.manual_seed(0)
    model = tf.LongformerModel(_longformer_config())
    res = check_export(model, (_ids(),), kwargs=dict(attention_mask=torch.ones(1, 16, dtype=torch.long)),
                       targets=("tract",))
    assert "aten::as_strided" in res.artifacts["tract"].ir.info.aten_ops


def test_longformer_with_a_global_token() -> None:
    # the classifier puts global attention on the first token: the global-token indices
    # come from a mask the model builds from constants, so they fold at export
    torch.manual_seed(0)
    model = tf.LongformerForSequenceClassification(_longformer_config(num_labels=3))
    res = check_export(model, (_ids(),), targets=("tract",))
    assert "aten::as_strided" in res.artifacts["tract"].ir.info.aten_ops


def test_led_encoder_decoder() -> None:
    torch.manual_seed(0)
    model = tf.LEDModel(tf.LEDConfig(vocab_size=V, d_model=32, encoder_layers=1, decoder_layers=1,
                                     encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                                     decoder_ffn_dim=64, attention_window=4, max_encoder_position_embeddings=64,
                                     max_decoder_position_embeddings=64, init_std=0.5, use_cache=False))
    ids = _ids()
    res = check_export(model, (ids,), kwargs=dict(decoder_input_ids=ids[:, :5]), targets=("tract",))
    assert "aten::as_strided" in res.artifacts["tract"].ir.info.aten_ops


class Encode(nn.Module):
    def __init__(self, codec: nn.Module) -> None:
        super().__init__()
        self.codec = codec

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        return self.codec.encode(audio).audio_codes


class EncodecDecode(Encode):
    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        return self.codec.decode(codes, [None]).audio_values


class MimiDecode(Encode):
    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        return self.codec.decode(codes).audio_values


def _encodec() -> tf.EncodecModel:
    torch.manual_seed(0)
    return tf.EncodecModel(tf.EncodecConfig(
        target_bandwidths=[8.0], sampling_rate=8000, audio_channels=1, hidden_size=16, num_filters=4,
        num_residual_layers=1, upsampling_ratios=[4, 2], codebook_size=16, codebook_dim=16, num_lstm_layers=1,
        use_causal_conv=True)).eval()


def _mimi() -> tf.MimiModel:
    torch.manual_seed(0)
    return tf.MimiModel(tf.MimiConfig(
        sampling_rate=1600, hidden_size=16, num_filters=4, upsampling_ratios=[4, 2], kernel_size=3,
        last_kernel_size=3, codebook_size=16, codebook_dim=16, num_quantizers=2,
        vector_quantization_hidden_dimension=16, upsample_groups=16, num_hidden_layers=1, intermediate_size=32,
        num_attention_heads=2, num_key_value_heads=2, head_dim=8, max_position_embeddings=64,
        sliding_window=16, frame_rate=12.5)).eval()


def test_encodec_encode_codes_are_exact() -> None:
    audio = torch.randn(1, 1, 67, generator=torch.Generator().manual_seed(1))  # not a multiple of the hop
    check_export(Encode(_encodec()), (audio,), targets=("tract",), tolerance="exact")


def test_encodec_decode() -> None:
    codec = _encodec()
    codes = codec.encode(torch.randn(1, 1, 64, generator=torch.Generator().manual_seed(1))).audio_codes
    check_export(EncodecDecode(codec), (codes,), targets=("tract",))


def test_mimi_encode_codes_are_exact_and_decode() -> None:
    codec = _mimi()
    audio = torch.randn(1, 1, 256, generator=torch.Generator().manual_seed(1))
    check_export(Encode(codec), (audio,), targets=("tract",), tolerance="exact")
    check_export(MimiDecode(codec), (codec.encode(audio).audio_codes,), targets=("tract",))


class Depth(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.model(pixels).predicted_depth


def test_dpt_depth_estimation() -> None:
    torch.manual_seed(0)
    model = tf.DPTForDepthEstimation(tf.DPTConfig(
        hidden_size=32, num_hidden_layers=4, num_attention_heads=4, intermediate_size=64, image_size=32,
        patch_size=8, backbone_out_indices=[0, 1, 2, 3], neck_hidden_sizes=[8, 16, 16, 32], fusion_hidden_size=16,
        head_in_index=-1, initializer_range=0.15))  # depths of order 1 (0.02 gives ~1e-9)
    check_export(Depth(model), (torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(1)),),
                 targets=("tract",))
