"""torchaudio's model classes in the zoo (group ``torchaudio``): tiny configs, random weights.

torchaudio's compiled extension is built against one torch release and fails to load beside
another (``import torchaudio`` raises OSError), yet its model classes are pure Python; so
``_ta`` puts a stand-in for ``torchaudio._extension`` in ``sys.modules`` and imports them
from ``.cache/torchaudio`` (where .ci/run installs it, out of site-packages, as in
site-packages it breaks transformers' import), only when a case is built: listing the zoo
never imports torchaudio.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import torch

from .entry import CACHE, Entry


def _no_align(func):
    """``fail_if_no_align``'s stand-in: the models never call the alignment kernels."""
    return func


def _ta() -> Any:
    """``torchaudio.models``, imported without its compiled extension (see the docstring)."""
    if "torchaudio" not in sys.modules:
        if str(CACHE / "torchaudio") not in sys.path:
            sys.path.append(str(CACHE / "torchaudio"))  # after site-packages: an installed one wins
        ext = types.ModuleType("torchaudio._extension")
        ext.__dict__.update(_IS_TORCHAUDIO_EXT_AVAILABLE=False, _IS_ALIGN_AVAILABLE=False,
                            fail_if_no_align=_no_align, _load_lib=lambda name: False)
        sys.modules.setdefault("torchaudio._extension", ext)
    import torchaudio.models

    return torchaudio.models


def _g() -> torch.Generator:
    return torch.Generator().manual_seed(1)


def _wav2letter():
    """The waveform front end: a wide strided Conv1d before the fixed conv stack."""
    model = _ta().Wav2Letter(num_classes=10, input_type="waveform")
    return model.eval(), (torch.randn(1, 1, 1600, generator=_g()),), {}


def _deepspeech():
    """Clipped-ReLU dense layers around a bidirectional ReLU RNN."""
    model = _ta().DeepSpeech(n_feature=8, n_hidden=16, n_class=10)
    return model.eval(), (torch.randn(2, 1, 6, 8, generator=_g()),), {}


def _convtasnet():
    """Dilated depthwise conv blocks with PReLU and global layer norm, a transposed-conv decoder."""
    model = _ta().ConvTasNet(num_sources=2, enc_kernel_size=4, enc_num_feats=16, msk_kernel_size=3,
                             msk_num_feats=8, msk_num_hidden_feats=16, msk_num_layers=2, msk_num_stacks=1)
    return model.eval(), (torch.randn(1, 1, 64, generator=_g()),), {}


def _hdemucs():
    """STFT and inverse STFT branches, a BLSTM and local attention in the deepest layers (their
    residual scale at 1, not 1e-4, so that they count in the outputs)."""
    model = _ta().HDemucs(["a", "b"], audio_channels=2, channels=4, nfft=64, depth=3, norm_starts=2,
                          norm_groups=2, dconv_depth=1, dconv_lstm=2, dconv_attn=2, dconv_comp=2,
                          dconv_init=1.0)
    return model.eval(), (torch.randn(1, 2, 256, generator=_g()),), {}


def _conformer():
    """Conformer layers with a key padding mask made from lengths."""
    model = _ta().Conformer(input_dim=16, num_heads=2, ffn_dim=32, num_layers=2, depthwise_conv_kernel_size=3)
    return model.eval(), (torch.randn(2, 7, 16, generator=_g()), torch.tensor([7, 5])), {}


def _emformer():
    """Segmented attention with memory and right context, masked by lengths."""
    model = _ta().Emformer(input_dim=16, num_heads=2, ffn_dim=32, num_layers=2, segment_length=4,
                           left_context_length=4, right_context_length=1, max_memory_size=2)
    return model.eval(), (torch.randn(2, 9, 16, generator=_g()), torch.tensor([9, 7])), {}


def _rnnt():
    """The training forward: Emformer transcriber, layer-normed LSTM predictor, joiner."""
    model = _ta().emformer_rnnt_model(
        input_dim=8, encoding_dim=16, num_symbols=10, segment_length=4, right_context_length=1,
        time_reduction_input_dim=8, time_reduction_stride=2, transformer_num_heads=2, transformer_ffn_dim=16,
        transformer_num_layers=1, transformer_dropout=0.0, transformer_activation="gelu",
        transformer_left_context_length=4, transformer_max_memory_size=0,
        transformer_weight_init_scale_strategy="depthwise", transformer_tanh_on_mem=False,
        symbol_embedding_dim=8, num_lstm_layers=1, lstm_layer_norm=True, lstm_layer_norm_epsilon=1e-5,
        lstm_dropout=0.0)
    g = _g()
    args = (torch.randn(2, 10, 8, generator=g), torch.tensor([10, 8]),
            torch.randint(0, 10, (2, 3), generator=g), torch.tensor([3, 2]))
    return model.eval(), args, {}


def _tacotron2():
    """Teacher-forced decoding: a location-sensitive attention loop over the given frames."""
    model = _ta().Tacotron2(n_mels=8, n_symbol=12, symbol_embedding_dim=16, encoder_embedding_dim=16,
                            encoder_n_convolution=1, encoder_kernel_size=3, decoder_rnn_dim=16,
                            attention_rnn_dim=16, attention_hidden_dim=8, attention_location_n_filter=4,
                            attention_location_kernel_size=3, prenet_dim=8, postnet_n_convolution=2,
                            postnet_kernel_size=3, postnet_embedding_dim=8)
    g = _g()
    args = (torch.randint(0, 12, (2, 5), generator=g), torch.tensor([5, 5]),
            torch.randn(2, 8, 4, generator=g), torch.tensor([4, 4]))
    return model.eval(), args, {}


def _wavernn():
    """An upsampling network feeding two GRUs over the waveform."""
    model = _ta().WaveRNN(upsample_scales=[2, 2], n_classes=16, hop_length=4, n_res_block=1, n_rnn=16, n_fc=16,
                          kernel_size=3, n_freq=8, n_hidden=8, n_output=8)
    g = _g()
    return model.eval(), (torch.randn(1, 1, 16, generator=g), torch.randn(1, 1, 8, 6, generator=g)), {}


def _w2v2(mode: str = "group_norm", norm_first: bool = False):
    return _ta().wav2vec2_model(
        extractor_mode=mode, extractor_conv_layer_config=[(8, 10, 5), (8, 3, 2)], extractor_conv_bias=False,
        encoder_embed_dim=16, encoder_projection_dropout=0.0, encoder_pos_conv_kernel=4,
        encoder_pos_conv_groups=2, encoder_num_layers=2, encoder_num_heads=2, encoder_attention_dropout=0.0,
        encoder_ff_interm_features=32, encoder_ff_interm_dropout=0.0, encoder_dropout=0.0,
        encoder_layer_norm_first=norm_first, encoder_layer_drop=0.0, aux_num_out=10)


def _wav2vec2():
    """Group-normed conv features, post-norm transformer, padding masks from lengths."""
    wave = torch.randn(2, 400, generator=_g())
    return _w2v2().eval(), (wave, torch.tensor([400, 300])), {}


def _hubert():
    """HuBERT's layout: layer-normed conv features and a pre-norm transformer."""
    return _w2v2("layer_norm", True).eval(), (torch.randn(1, 400, generator=_g()),), {}


def _wavlm():
    """WavLM: gated relative position bias from bucketed distances."""
    model = _ta().wavlm_model(
        extractor_mode="group_norm", extractor_conv_layer_config=[(8, 10, 5), (8, 3, 2)],
        extractor_conv_bias=False, encoder_embed_dim=16, encoder_projection_dropout=0.0,
        encoder_pos_conv_kernel=4, encoder_pos_conv_groups=2, encoder_num_layers=2, encoder_num_heads=2,
        encoder_num_buckets=8, encoder_max_distance=16, encoder_attention_dropout=0.0,
        encoder_ff_interm_features=32, encoder_ff_interm_dropout=0.0, encoder_dropout=0.0,
        encoder_layer_norm_first=False, encoder_layer_drop=0.0, aux_num_out=None)
    return model.eval(), (torch.randn(1, 400, generator=_g()),), {}


def _squim_objective():
    """A dual-path LSTM over chunked conv features and transformer branches per metric."""
    model = _ta().squim_objective_model(feat_dim=16, win_len=8, d_model=16, nhead=2, hidden_dim=16,
                                        num_blocks=1, rnn_type="LSTM", chunk_size=8)
    return model.eval(), (torch.randn(1, 256, generator=_g()),), {}


def _squim_subjective():
    """A tiny wav2vec2's features of waveform and reference, attention-pooled (no 95M base model)."""
    ta = _ta()
    from torchaudio.models.squim.subjective import Predictor

    model = ta.SquimSubjective(_w2v2(), torch.nn.Linear(16, 8), Predictor(16, 8))
    g = _g()
    return model.eval(), (torch.randn(1, 400, generator=g), torch.randn(1, 300, generator=g)), {}


def _entry(name: str, cls: str, make) -> Entry:
    return Entry(name, "torchaudio", cls, make=make, needs="torchaudio")


TORCHAUDIO: list[Entry] = [
    _entry("ta_wav2letter", "Wav2Letter", _wav2letter),
    _entry("ta_deepspeech", "DeepSpeech", _deepspeech),
    _entry("ta_convtasnet", "ConvTasNet", _convtasnet),
    _entry("ta_hdemucs", "HDemucs", _hdemucs),
    _entry("ta_conformer", "Conformer", _conformer),
    _entry("ta_emformer", "Emformer", _emformer),
    _entry("ta_rnnt", "RNNT", _rnnt),
    _entry("ta_tacotron2", "Tacotron2", _tacotron2),
    _entry("ta_wavernn", "WaveRNN", _wavernn),
    _entry("ta_wav2vec2", "Wav2Vec2Model", _wav2vec2),
    _entry("ta_hubert", "Wav2Vec2Model", _hubert),
    _entry("ta_wavlm", "Wav2Vec2Model", _wavlm),
    _entry("ta_squim_objective", "SquimObjective", _squim_objective),
    _entry("ta_squim_subjective", "SquimSubjective", _squim_subjective),
]
