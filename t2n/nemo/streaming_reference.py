"""NeMo's own cache-aware streaming of one utterance, the reference a streaming export is
checked against: ``CacheAwareStreamingAudioBuffer`` cuts the features, and
``conformer_stream_step`` runs each chunk with the caches of the previous one, as NeMo's
``examples/asr/asr_cache_aware_streaming/speech_to_text_cache_aware_streaming_infer.py``
drives them (the first chunk drops nothing after the subsampling unless
``pad_and_drop_preencoded``; the last keeps all its outputs). Only NeMo's public calls
run here, never t2n's wrappers; a hook on the encoder records what each step encoded."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import torch


@attrs.frozen
class NemoStream:
    """What NeMo's loop gave: per-frame ``predictions`` (CTC: the best labels, concatenated
    over the chunks; transducers: the hypothesis' labels), the final ``text``, the
    ``features`` it streamed [features, frames], and per chunk the valid ``encoded``
    frames [d_model, frames]."""

    predictions: list[int]
    text: str
    features: np.ndarray
    encoded: list[np.ndarray]


@torch.no_grad()
def nemo_stream(model: Any, audio: np.ndarray, *, pad_and_drop_preencoded: bool,
                decoder: str | None = None) -> NemoStream:
    """Stream ``audio`` [samples] through ``model`` (its encoder set up for the context
    to check) as NeMo does; ``decoder="ctc"`` or ``"rnnt"`` picks a hybrid model's head
    (its ``cur_decoder``, restored after), by default the one it has."""
    hybrid = hasattr(model, "cur_decoder")
    saved = model.cur_decoder if hybrid else None
    if hybrid and decoder is not None:
        model.cur_decoder = decoder
    try:
        return _stream(model, audio, pad_and_drop_preencoded)
    finally:
        if hybrid:
            model.cur_decoder = saved


def _stream(model: Any, audio: np.ndarray, pad_and_drop_preencoded: bool) -> NemoStream:
    from nemo.collections.asr.parts.utils.streaming_utils import CacheAwareStreamingAudioBuffer

    encoder = model.encoder
    buffer = CacheAwareStreamingAudioBuffer(model, online_normalization=False,
                                            pad_and_drop_preencoded=pad_and_drop_preencoded)
    appended = buffer.append_audio(np.asarray(audio, np.float32))
    features = appended[0][0].numpy()
    cache_channel, cache_time, cache_len = encoder.get_initial_cache_state(batch_size=1)
    encoded: list[np.ndarray] = []

    def record(_module: Any, _inputs: Any, outputs: Any) -> None:
        frames, lengths = outputs[0], outputs[1]
        encoded.append(frames[0, :, :int(lengths[0])].numpy().copy())

    hook = encoder.register_forward_hook(record)
    previous_predictions, previous_hypotheses, texts = None, None, None
    try:
        for step, (chunk, lengths) in enumerate(buffer):
            drop = 0 if step == 0 and not pad_and_drop_preencoded else encoder.streaming_cfg.drop_extra_pre_encoded
            out = model.conformer_stream_step(
                processed_signal=chunk, processed_signal_length=lengths, cache_last_channel=cache_channel,
                cache_last_time=cache_time, cache_last_channel_len=cache_len,
                keep_all_outputs=buffer.is_buffer_empty(), previous_hypotheses=previous_hypotheses,
                previous_pred_out=previous_predictions, drop_extra_pre_encoded=drop, return_transcription=True)
            previous_predictions, texts, cache_channel, cache_time, cache_len, previous_hypotheses = out[:6]
    finally:
        hook.remove()
    predictions = [int(k) for k in previous_predictions[0].tolist()] if previous_predictions else []
    text = "" if not texts else str(getattr(texts[0], "text", texts[0]))
    return NemoStream(predictions, text, features, encoded)
