"""How long the audio of a NeMo export may be: the longest audio it is exported for
(``max_audio_seconds``), the bound on the encoder's feature frames the manifest states,
and NeMo's length tables grown to cover it.

NeMo's encoders hold tables as long as the longest audio they have seen, and grow them
(with the same values) when given longer audio: a Conformer's positional table
(``pos_emb_max_len`` positions to start with, ``set_max_audio_length``), a convolution
encoder's frame ranges that its squeeze-excitation blocks mask with
(``update_max_sequence_length``). An artifact holds them as constants, so it is right up
to their length only: the export grows them, by NeMo's own calls, to the declared
maximum, and the encoder's plan asserts it (``tract_assert frames <= N``), which
:class:`~t2n.nemo.audio.AudioLimits` reads back to refuse longer audio before tract runs.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import attrs

from t2n.errors import NemoExportError


class AudioFront(Protocol):
    """What the lengths need of a model's facts (a recognizer's or a classifier's)."""

    @property
    def sample_rate(self) -> int: ...

    @property
    def hop_length(self) -> int: ...

    @property
    def subsampling_factor(self) -> int: ...

DEFAULT_TABLE_POSITIONS = 5000
"""NeMo's default ``pos_emb_max_len``: 5000 encoded frames, 400 s of audio for a
FastConformer (8x subsampling of 10 ms frames)."""

DEFAULT_CONV_SECONDS = 400.0
"""The default bound of an encoder without a positional table (QuartzNet, Jasper,
Citrinet): the span NeMo's default table gives a FastConformer."""

CHECK_SAMPLES = 16000 + 77
"""The longest utterance the export is checked with (:mod:`t2n.nemo.verify`, the
encoder's traced example): the shortest maximum an export may declare."""


def is_conv_encoder(encoder: Any) -> bool:
    """NeMo's convolution-only encoder (``ConvASREncoder`` and its subclasses)."""
    return any(c.__name__ == "ConvASREncoder" for c in type(encoder).__mro__)


@attrs.frozen
class AudioSpan:
    """The longest audio an export takes, in feature frames (``None``: unbounded), and
    whether the encoder holds length tables that must cover it."""

    max_frames: int | None
    tables: bool

    def seconds(self, facts: AudioFront) -> float | None:
        if self.max_frames is None:
            return None
        return self.max_frames * max(facts.hop_length, 1) / facts.sample_rate


def audio_span(encoder: Any, facts: AudioFront, max_audio_seconds: float | None) -> AudioSpan:
    """The span of an export of ``encoder`` for audio of at most ``max_audio_seconds``
    (``None``: what the encoder's positional table covers, or
    :data:`DEFAULT_CONV_SECONDS` for an encoder without one)."""
    positional = _positions(encoder)
    tables = positional is not None or _has_squeeze_excitation(encoder)
    if max_audio_seconds is None:
        if positional is not None:
            return AudioSpan(positional * max(facts.subsampling_factor, 1), True)
        if not is_conv_encoder(encoder):
            return AudioSpan(None, tables)
        max_audio_seconds = DEFAULT_CONV_SECONDS
    if not isinstance(max_audio_seconds, (int, float)) or not math.isfinite(max_audio_seconds) \
            or max_audio_seconds <= 0:
        raise NemoExportError("encoder", f"max_audio_seconds={max_audio_seconds!r}: give the length of the longest "
                                         "audio to transcribe, in seconds (a positive number)")
    if facts.hop_length <= 0:
        raise NemoExportError("preprocessor", "the model's featurizer has no hop length, so max_audio_seconds "
                                              "cannot be turned into feature frames; export without it")
    frames = int(round(max_audio_seconds * facts.sample_rate)) // facts.hop_length
    least = max(CHECK_SAMPLES // facts.hop_length, 2 * facts.subsampling_factor)
    if frames < least:
        shortest = math.ceil(least * facts.hop_length / facts.sample_rate * 100) / 100
        raise NemoExportError("encoder", f"max_audio_seconds={max_audio_seconds} is shorter than the utterances the "
                                         f"export is traced and checked with ({least} feature frames): declare at "
                                         f"least {shortest:.2f} s")
    return AudioSpan(frames, tables)


def extend_tables(encoder: Any, span: AudioSpan, subsampling: int) -> None:
    """Grow ``encoder``'s length tables, in place and by NeMo's own calls (as its forward
    does when given audio that long), to cover ``span``: the values are the same, only
    longer. A table already longer is kept."""
    if span.max_frames is None or not span.tables:
        return
    positions = _positions(encoder)
    if positions is not None:
        needed = -(-span.max_frames // max(subsampling, 1)) + 1  # encoded frames, rounded up, and one to spare
        if needed > positions:
            encoder.set_max_audio_length(needed)
    elif is_conv_encoder(encoder) and int(getattr(encoder, "max_audio_length", 0)) < span.max_frames:
        parameter = next(encoder.parameters(), None)
        encoder.update_max_sequence_length(seq_length=span.max_frames,
                                           device=parameter.device if parameter is not None else "cpu")


def _positions(encoder: Any) -> int | None:
    """The length of a Conformer's positional table (the encoded frames it covers), or
    ``None`` for an encoder without one."""
    pos_enc = getattr(encoder, "pos_enc", None)
    length = getattr(encoder, "max_audio_length", None)
    if pos_enc is None or not hasattr(encoder, "set_max_audio_length") or not isinstance(length, int) or length <= 0:
        return None
    return length


def _has_squeeze_excitation(encoder: Any) -> bool:
    return is_conv_encoder(encoder) and any(type(m).__name__ == "SqueezeExcite" for m in encoder.modules())
