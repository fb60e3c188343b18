"""Tiny NeMo speech recognizers built from config dicts (random weights, nothing
downloaded), synthetic audio, and NeMo's own greedy transcription to compare with.

NeMo is imported by the tests' fixture (``conftest.py``), never at module level here.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch

LABELS = [" ", "a", "b", "c", "d", "e", "f", "g", "h", "i", "'"]
FEATURES = 16
D_MODEL = 32


def nemo_or_skip() -> Any:
    """``nemo.collections.asr``; skipped when NeMo is not installed, except under CI
    (``CI=true``), where the NeMo tests must run."""
    try:
        import nemo.collections.asr as asr
    except ImportError as exc:
        why = f"NeMo is not installed here ({exc}): pip install 't2n[nemo]'"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return asr


def preprocessor(**over: Any) -> dict[str, Any]:
    cfg = {"_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor", "sample_rate": 16000,
           "normalize": "per_feature", "window_size": 0.025, "window_stride": 0.01, "window": "hann",
           "features": FEATURES, "n_fft": 512, "log": True, "frame_splicing": 1, "dither": 1e-5, "pad_to": 16,
           "pad_value": 0.0}
    return {**cfg, **over}


def encoder(kind: str) -> dict[str, Any]:
    """FastConformer (8x depthwise-striding subsampling, kernel 9) or Conformer (4x striding)."""
    enc = {"_target_": "nemo.collections.asr.modules.ConformerEncoder", "feat_in": FEATURES, "feat_out": -1,
           "n_layers": 2, "d_model": D_MODEL, "ff_expansion_factor": 2, "self_attention_model": "rel_pos",
           "n_heads": 2, "att_context_size": [-1, -1], "xscaling": True, "untie_biases": True,
           "pos_emb_max_len": 5000, "conv_norm_type": "batch_norm", "dropout": 0.1, "dropout_pre_encoder": 0.1,
           "dropout_emb": 0.0, "dropout_att": 0.1, "subsampling_conv_channels": 16}
    if kind == "fastconformer":
        enc.update(subsampling="dw_striding", subsampling_factor=8, conv_kernel_size=9)
    else:
        enc.update(subsampling="striding", subsampling_factor=4, conv_kernel_size=15)
    return enc


def jasper_block(filters: int, repeat: int, kernel: int, stride: int = 1, *, residual: bool = True,
                 **over: Any) -> dict[str, Any]:
    """One block of a ``ConvASREncoder``: ``repeat`` time-channel separable convolutions."""
    return {"filters": filters, "repeat": repeat, "kernel": [kernel], "stride": [stride], "dilation": [1],
            "dropout": 0.0, "residual": residual, "separable": True, **over}


def conv_encoder(kind: str) -> dict[str, Any]:
    """A tiny QuartzNet (separable convolutions, residual blocks, a dilated one; 2x) or
    Citrinet (squeeze-excitation over the whole utterance in every block, strided blocks
    with ``stride_add`` residuals and ``stride_last``, swish; 4x)."""
    if kind == "quartznet":
        blocks = [jasper_block(32, 1, 11, 2, residual=False), jasper_block(32, 2, 13), jasper_block(48, 2, 15),
                  jasper_block(48, 1, 29, residual=False, dilation=[2]), jasper_block(D_MODEL, 1, 1, residual=False)]
        activation = "relu"
    else:
        se = {"se": True, "se_context_size": -1, "se_reduction_ratio": 8}
        strided = {**se, "residual_mode": "stride_add", "stride_last": True}
        blocks = [jasper_block(32, 1, 5, residual=False, **se), jasper_block(32, 2, 7, 2, **strided),
                  jasper_block(32, 2, 9, **se), jasper_block(48, 2, 11, 2, **strided), jasper_block(48, 2, 13, **se),
                  jasper_block(D_MODEL, 1, 41, residual=False, **se)]
        activation = "swish"
    return {"_target_": "nemo.collections.asr.modules.ConvASREncoder", "feat_in": FEATURES,
            "activation": activation, "conv_mask": True, "jasper": blocks}


CONV_ENCODERS = ("quartznet", "citrinet")


def ctc_decoder() -> dict[str, Any]:
    return {"_target_": "nemo.collections.asr.modules.ConvASRDecoder", "feat_in": None,
            "num_classes": len(LABELS), "vocabulary": LABELS}


def config(name: str) -> dict[str, Any]:
    """The config of ``fastconformer_ctc``, ``conformer_ctc``, ``fastconformer_rnnt``,
    ``fastconformer_tdt``, ``fastconformer_hybrid``, ``quartznet_ctc`` or ``citrinet_ctc``."""
    arch, _, head = name.partition("_")
    cfg: dict[str, Any] = {"sample_rate": 16000, "labels": LABELS, "preprocessor": preprocessor(),
                           "encoder": conv_encoder(arch) if arch in CONV_ENCODERS else encoder(arch)}
    if head == "ctc":
        return {**cfg, "decoder": ctc_decoder()}
    cfg.update(
        decoder={"_target_": "nemo.collections.asr.modules.RNNTDecoder", "normalization_mode": None,
                 "random_state_sampling": False, "blank_as_pad": True, "vocab_size": len(LABELS),
                 "prednet": {"pred_hidden": D_MODEL, "pred_rnn_layers": 1, "t_max": None, "dropout": 0.2}},
        joint={"_target_": "nemo.collections.asr.modules.RNNTJoint", "log_softmax": None, "preserve_memory": False,
               "fuse_loss_wer": False, "fused_batch_size": 4, "num_classes": len(LABELS), "vocabulary": LABELS,
               "jointnet": {"joint_hidden": D_MODEL, "activation": "relu", "dropout": 0.2,
                            "encoder_hidden": D_MODEL, "pred_hidden": D_MODEL}},
        model_defaults={"enc_hidden": D_MODEL, "pred_hidden": D_MODEL},
        decoding={"strategy": "greedy_batch", "greedy": {"max_symbols": 5}})
    if head == "tdt":
        durations = [0, 1, 2, 3, 4]
        cfg["joint"]["num_extra_outputs"] = len(durations)
        cfg["decoding"].update(model_type="tdt", durations=durations)
        cfg["loss"] = {"loss_name": "tdt", "tdt_kwargs": {"durations": durations, "sigma": 0.02, "omega": 0.1}}
    if head == "hybrid":
        cfg["aux_ctc"] = {"decoder": ctc_decoder(), "decoding": {"strategy": "greedy"}}
    return cfg


def synthetic_audio(samples: int, seed: int) -> torch.Tensor:
    """Tones that change every 1/6 s, with a little noise."""
    gen = torch.Generator().manual_seed(seed)
    t = torch.arange(samples) / 16000.0
    freqs = 200 + 1500 * torch.rand(16, generator=gen)
    segment = (t * 6).long().clamp(max=15)
    return torch.sin(2 * torch.pi * freqs[segment] * t) * 0.5 + torch.randn(samples, generator=gen) * 0.05


@torch.no_grad()
def liven(model: Any, blank_bias: float = 1.0, enc_gain: float = 5.0) -> Any:
    """Random heads give one label for every frame (the encoder's output varies little
    around its mean): centre them on the mean encoder output of an utterance and widen
    them, so that greedy decoding changes labels often."""
    audio = synthetic_audio(24000, 99)
    feats, flen = model.preprocessor(input_signal=audio[None], length=torch.tensor([24000]))
    enc, _ = model.encoder(audio_signal=feats, length=flen)
    mean = enc[0].mean(1)
    gen = torch.Generator().manual_seed(7)
    if getattr(model, "joint", None) is not None:
        proj = model.joint.enc
        proj.weight.mul_(enc_gain)
        proj.bias.copy_(-(proj.weight @ mean))
        last = model.joint.joint_net[-1]
        last.weight.copy_(torch.randn(last.weight.shape, generator=gen))
        last.bias.zero_()
        last.bias[model.decoder.blank_idx] += blank_bias
        embed = model.decoder.prediction["embed"]
        embed.weight[:-1].copy_(torch.randn(embed.weight[:-1].shape, generator=gen))
    for head in (getattr(model, "ctc_decoder", None), model.decoder):
        conv = getattr(head, "decoder_layers", [None])[0]
        if conv is not None:
            conv.weight.copy_(torch.randn(conv.weight.shape, generator=gen))
            conv.bias.copy_(-(conv.weight[:, :, 0] @ mean))
    return model


def build(name: str) -> Any:
    import t2n.nemo

    return liven(t2n.nemo.load_model(config(name)))


@torch.no_grad()
def nemo_greedy(model: Any, audio: torch.Tensor, *, ctc: bool = False) -> list[int]:
    """NeMo's own greedy decoding of one utterance: its preprocessor (with its padding of
    the frames), its encoder, and its decoding object: the transducer's (greedy_batch,
    the default) or the CTC head's, whose repeats NeMo folds (``decode_hypothesis``).
    (``transcribe()`` gives the same for utterances of a second or more; it pads shorter
    ones to a second of audio with silence on both sides.)"""
    feats, flen = model.preprocessor(input_signal=audio[None], length=torch.tensor([audio.shape[0]]))
    encoded, elen = model.encoder(audio_signal=feats, length=flen)
    if getattr(model, "joint", None) is not None and not ctc:
        hyps = model.decoding.rnnt_decoder_predictions_tensor(encoder_output=encoded, encoded_lengths=elen,
                                                              return_hypotheses=True)
        return [int(i) for i in hyps[0].y_sequence.tolist()]
    head, decoding = (model.ctc_decoder, model.ctc_decoding) if hasattr(model, "ctc_decoding") else \
        (model.decoder, model.decoding)
    logprobs = head(encoder_output=encoded)
    # fresh tensors: NeMo's type check refuses the neural types the modules attached
    hyps = decoding.decoding(decoder_output=logprobs.clone(), decoder_lengths=elen.clone())[0]
    saved = decoding.compute_timestamps
    decoding.compute_timestamps = True  # the folded ids kept, not turned into text
    try:
        hyps = decoding.decode_hypothesis(hyps, fold_consecutive=True)
    finally:
        decoding.compute_timestamps = saved
    return [int(i) for i in hyps[0].text[0]]


@torch.no_grad()
def nemo_text(model: Any, audio: torch.Tensor) -> str:
    """The text of NeMo's ``transcribe`` (the model's default decoder; an utterance of a
    second or more, which it does not pad); the model's modules left in the modes they
    were in."""
    modes = {m: m.training for m in model.modules()}
    try:
        hyp = model.transcribe([audio.numpy()], batch_size=1, return_hypotheses=True, verbose=False)[0]
    finally:  # NeMo 3.0's transcribe() leaves the encoder and decoder in training mode (its
        for m, training in modes.items():  # _transcribe_on_end unfreezes them after restoring the mode)
            m.training = training
    return str(hyp.text)


@torch.no_grad()
def nemo_features(model: Any, audio: torch.Tensor) -> torch.Tensor:
    """NeMo's features of one utterance, its valid frames only: ``[features, frames]``."""
    feats, flen = model.preprocessor(input_signal=audio[None], length=torch.tensor([audio.shape[0]]))
    return feats[0, :, : int(flen[0])]
