"""A NeMo speech recognizer's reference: the model's own modules on one utterance —
its ``preprocessor`` (audio samples to features), its ``forward`` (features to the
encoder's output, or to the CTC head's log-probabilities for a CTC model) and a hybrid
model's ``ctc_decoder`` — as NeMo computes them, never t2n's wrappers of its
sub-networks."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


def synthetic_utterance(samples: int, seed: int) -> np.ndarray:
    """``[samples]`` f32 audio at 16 kHz: a few tones that change over time, and noise."""
    generator = torch.Generator().manual_seed(seed)
    t = torch.arange(samples, dtype=torch.float64) / 16000
    tones = sum(torch.sin(2 * torch.pi * f * t * (1 + 0.3 * torch.sin(2 * torch.pi * (k + 1) * t)))
                for k, f in enumerate((220.0, 470.0, 1130.0)))
    noise = torch.randn(samples, generator=generator, dtype=torch.float64)
    return (0.1 * tones + 0.02 * noise).to(torch.float32).numpy()


@torch.no_grad()
def nemo_outputs(model: Any, audio: np.ndarray) -> dict[str, np.ndarray]:
    """NeMo's ``features`` ``[features, frames]``, the ``encoded`` output ``[d_model, T]``
    of its encoder and, for a model with a CTC head, its ``logprobs`` ``[T, labels]``:
    the valid frames of one utterance."""
    signal = torch.as_tensor(audio)[None]
    length = torch.tensor([signal.shape[1]])
    features, frames = model.preprocessor(input_signal=signal, length=length)
    out = {"features": features[0, :, :int(frames[0])].numpy()}
    result = model.forward(input_signal=signal, input_signal_length=length)
    head = getattr(model, "ctc_decoder", None)
    if getattr(model, "joint", None) is None:  # a CTC model's forward: (log-probs, lengths, predictions)
        logprobs, encoded_length = result[0], int(result[1][0])
        out["logprobs"] = logprobs[0, :encoded_length].numpy()
        encoded, elen = model.encoder(audio_signal=features, length=frames)
        out["encoded"] = encoded[0, :, :int(elen[0])].numpy()
        return out
    encoded, encoded_length = result[0], int(result[1][0])  # a transducer's: (encoded, lengths)
    out["encoded"] = encoded[0, :, :encoded_length].numpy()
    if head is not None:
        out["logprobs"] = head(encoder_output=encoded)[0, :encoded_length].numpy()
    return out
