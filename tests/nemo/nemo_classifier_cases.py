"""Tiny NeMo classifiers for the tests of this folder, built from config dicts (random
weights, nothing downloaded): a MatchboxNet-like speech-commands classifier
(``EncDecClassificationModel``) and a frame MarbleNet VAD
(``EncDecFrameClassificationModel``), shaped as NeMo's ``matchboxnet_3x1x64_v2.yaml``
and ``marblenet_3x2x64_20ms.yaml`` are, smaller; and NeMo's own outputs to compare with.

NeMo is imported inside the functions, never at module level (the tests skip without it).
"""

from __future__ import annotations

import wave
from typing import Any

import numpy as np
import torch
from speech.nemo_models import FEATURES, jasper_block, preprocessor, synthetic_audio

COMMANDS = ["yes", "no", "up", "down", "left", "right"]
"""The labels of the speech-commands classifier (a subset of Speech Commands v2's)."""


def matchboxnet() -> dict[str, Any]:
    """One label per utterance: separable residual blocks, a dilated one, a 1x1 one;
    average pooling over every frame NeMo's featurizer gives (``pad_to`` 16)."""
    blocks = [jasper_block(32, 1, 11, residual=False), jasper_block(24, 1, 13), jasper_block(24, 1, 15),
              jasper_block(32, 1, 29, residual=False, dilation=[2]), jasper_block(32, 1, 1, residual=False,
                                                                                  separable=False)]
    return {"target": "nemo.collections.asr.models.EncDecClassificationModel", "sample_rate": 16000,
            "labels": COMMANDS, "preprocessor": preprocessor(),
            "encoder": {"_target_": "nemo.collections.asr.modules.ConvASREncoder", "feat_in": FEATURES,
                        "activation": "relu", "conv_mask": True, "jasper": blocks},
            "decoder": {"_target_": "nemo.collections.asr.modules.ConvASRDecoderClassification", "feat_in": 32,
                        "return_logits": True, "pooling_type": "avg"}}


def frame_marblenet() -> dict[str, Any]:
    """One label per 20 ms frame: a strided first block (2x), no normalization of the
    features (``normalize: "None"``), ``pad_to`` 2, a ``MultiLayerPerceptron`` decoder."""
    blocks = [jasper_block(32, 1, 11, 2, residual=False), jasper_block(24, 2, 13), jasper_block(24, 2, 15),
              jasper_block(32, 1, 29, residual=False, dilation=[2]), jasper_block(32, 1, 1, residual=False,
                                                                                  separable=False)]
    return {"target": "nemo.collections.asr.models.EncDecFrameClassificationModel", "sample_rate": 16000,
            "labels": ["0", "1"], "preprocessor": preprocessor(normalize="None", pad_to=2),
            "encoder": {"_target_": "nemo.collections.asr.modules.ConvASREncoder", "feat_in": FEATURES,
                        "activation": "relu", "conv_mask": True, "jasper": blocks},
            "decoder": {"_target_": "nemo.collections.common.parts.MultiLayerPerceptron", "hidden_size": 32,
                        "num_classes": -1, "num_layers": 1, "activation": "relu", "log_softmax": False}}


@torch.no_grad()
def liven(model: Any, gain: float = 4.0) -> Any:
    """Random heads give one label to everything (the encoder's output varies little
    around its mean): centre the last linear layer on the mean encoder output of an
    utterance and widen it, so that labels change between utterances and frames."""
    audio = synthetic_audio(24000, 99)
    feats, flen = model.preprocessor(input_signal=audio[None], length=torch.tensor([24000]))
    enc, _ = model.encoder(audio_signal=feats, length=flen)
    mean = enc[0].mean(1)
    decoder = model.decoder
    linear = decoder.decoder_layers[0] if hasattr(decoder, "decoder_layers") else decoder.last_linear_layer
    gen = torch.Generator().manual_seed(7)
    linear.weight.copy_(torch.randn(linear.weight.shape, generator=gen) * gain / mean.abs().mean())
    linear.bias.copy_(-(linear.weight @ mean))
    return model


def build(config: dict[str, Any]) -> Any:
    import t2n.nemo

    return liven(t2n.nemo.load_model(config))


@torch.no_grad()
def nemo_probabilities(model: Any, audio: np.ndarray) -> np.ndarray:
    """The softmax of the model's own ``forward`` on one utterance: ``[labels]``, or
    ``[frames, labels]`` for a frame classifier (as NeMo's frame VAD computes them,
    ``vad_utils.generate_vad_frame_pred``)."""
    signal = torch.as_tensor(audio, dtype=torch.float32)[None]
    logits = model.forward(input_signal=signal, input_signal_length=torch.tensor([signal.shape[1]]))
    return torch.softmax(logits, dim=-1)[0].numpy()


def write_wav(path: Any, samples: np.ndarray, rate: int = 16000) -> Any:
    """16-bit PCM mono."""
    pcm = np.clip(np.round(np.asarray(samples) * 32767), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return path
