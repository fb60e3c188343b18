"""Cache-aware streaming over a NeMo export, in tract's Python package: the features cut
into NeMo's chunks, each chunk through the ``encoder_step`` artifact with the caches the
previous step returned, each chunk's encoded frames decoded as they come.

    export = t2n.nemo.export_streaming_asr(model, "out/", att_context_size=[70, 1])
    result = t2n.nemo.streaming.transcribe_stream("out/", samples)
    print(result.ids, result.text)

    streamer = t2n.nemo.streaming.StreamingTranscriber(t2n.nemo.load("out/"))
    for piece in pieces:                  # audio as it arrives, any sizes
        new_ids = streamer.feed(piece)    # chunks run as soon as their frames are complete
    new_ids = streamer.finish()           # the tail, as NeMo's preprocessor pads it

This is what NeMo's ``conformer_stream_step`` loop over ``CacheAwareStreamingAudioBuffer``
computes (``examples/asr/asr_cache_aware_streaming``), one utterance at a time:

* features: the export's ``preprocessor`` on the whole utterance, then chunked (as NeMo's
  buffer does), or, with :meth:`StreamingTranscriber.feed`, computed as the audio arrives
  (:mod:`t2n.nemo.streaming_features`: the same frames). NeMo's buffer streams every
  frame its preprocessor makes, the last one included (never valid, set to the pad
  value), so that frame is appended here too;
* chunks: the first of ``steps.first.chunk_frames`` frames, then ``steps.next`` ones, each
  preceded by the last ``pre_encode_cache_frames`` frames before it (zeros at the start)
  and advanced by ``shift_frames``; a tail shorter than ``min_chunk_frames`` is left out,
  as NeMo's buffer leaves it. The step artifacts have fixed shapes: a shorter last window
  is padded with zeros and its ``length`` says how many frames are real (NeMo masks the
  rest in its subsampling and attention, so the real frames come out the same);
* the encoder step: ``audio_signal`` [1, features, window], ``length`` [1], and the caches
  (``cache_last_channel`` [1, layers, cache, d_model], ``cache_last_time`` [1, layers,
  d_model, conv context], ``cache_last_channel_len`` [1]) in; ``outputs`` [1, d_model,
  valid_out_len], ``encoded_lengths`` [1] and the next caches out (NeMo's
  ``forward_for_export`` with caches, batch first);
* decoding: CTC: the best label of each encoded frame, concatenated over the chunks, then
  repeats merged and blanks dropped over the whole sequence (NeMo decodes the
  concatenation, so a label repeated across a chunk boundary is one label); RNN-T: the
  greedy loop continued from chunk to chunk with the prediction network's state.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from t2n.errors import NemoAudioError, NemoManifestError
from t2n.ir import DType
from t2n.nemo.streaming_features import FeatureStream
from t2n.nemo.transcribe import AsrArtifacts

STEP = "encoder_step"
FIRST_STEP = "encoder_step_first"
"""The step artifacts: every chunk, or (``pad_and_drop_preencoded=False``) every chunk
after the first, which has its own window and drops nothing after the subsampling."""

SECTION = "streaming"
"""The key of the streaming facts in ``manifest.json``."""


@attrs.frozen
class StepShape:
    """How one kind of step cuts the features (a ``steps`` entry of the manifest)."""

    artifact: str
    chunk_frames: int
    shift_frames: int
    pre_encode_cache_frames: int
    window_frames: int
    min_chunk_frames: int
    drop_extra_pre_encoded: int

    @classmethod
    def from_manifest(cls, data: Mapping[str, Any]) -> StepShape:
        return cls(**{f.name: data[f.name] for f in attrs.fields(cls)})


@attrs.frozen
class Window:
    """One step's input: ``features`` [features, window_frames] (zeros after ``length``)."""

    index: int
    start: int
    """The first feature frame of the chunk (after its pre-encode cache)."""
    features: np.ndarray
    length: int
    step: StepShape


def windows(features: np.ndarray, first: StepShape, later: StepShape) -> Iterator[Window]:
    """NeMo's ``CacheAwareStreamingAudioBuffer`` on one stream: the chunks of ``features``
    [features, frames], each with its pre-encode cache, padded to the step's window."""
    start, index = 0, 0
    while start < features.shape[1]:
        step = first if start == 0 else later
        window = cut_window(features, 0, start, index, step)
        if window is None:
            return
        yield window
        start += step.shift_frames
        index += 1


def cut_window(features: np.ndarray, base: int, start: int, index: int, step: StepShape) -> Window | None:
    """The window of the chunk at frame ``start`` (``features`` [features, frames] begin
    at frame ``base``, its pre-encode cache frames kept), as NeMo's buffer cuts it; ``None``
    if the chunk is shorter than NeMo streams."""
    rows = features.shape[0]
    chunk = features[:, start - base:start - base + step.chunk_frames]
    if chunk.shape[1] < step.min_chunk_frames:
        return None
    cached = features[:, max(start - step.pre_encode_cache_frames, 0) - base:start - base]
    zeros = np.zeros((rows, step.pre_encode_cache_frames - cached.shape[1]), features.dtype)
    window = np.concatenate([zeros, cached, chunk], axis=1)
    length = window.shape[1]
    if length > step.window_frames:
        raise NemoManifestError(f"a chunk of {length} frames does not fit {step.artifact}'s window of "
                                f"{step.window_frames}: the manifest's steps disagree with the artifact")
    padded = np.zeros((rows, step.window_frames), np.float32)
    padded[:, :length] = window
    return Window(index, start, padded, length, step)


class FrameChunker:
    """:func:`windows` as the frames arrive: :meth:`push` new frames, get the windows
    whose chunk is complete; with ``last`` (no frames to come) the last ones too, a
    short last chunk included. Only the frames a later window needs are kept."""

    def __init__(self, first: StepShape, later: StepShape, rows: int) -> None:
        self.first, self.later = first, later
        self.frames = np.zeros((rows, 0), np.float32)
        self.base = 0
        """The index of ``frames[:, 0]`` in the utterance."""
        self.start, self.index = 0, 0

    def push(self, frames: np.ndarray, *, last: bool = False) -> list[Window]:
        self.frames = np.concatenate([self.frames, np.asarray(frames, np.float32)], axis=1)
        total = self.base + self.frames.shape[1]
        out: list[Window] = []
        while self.start < total:
            step = self.first if self.start == 0 else self.later
            if not last and self.start + step.chunk_frames > total:
                break
            window = cut_window(self.frames, self.base, self.start, self.index, step)
            if window is None:
                self.start = total
                break
            out.append(window)
            self.start += step.shift_frames
            self.index += 1
        keep = min(max(self.start - self.later.pre_encode_cache_frames, self.base), total)
        self.frames = self.frames[:, keep - self.base:]
        self.base = keep
        return out


@attrs.frozen
class StreamResult:
    """What :func:`transcribe_stream` gives: the label ids and their text, and per chunk
    the encoded frames and the encoder step's time in tract (seconds; the first includes
    loading the artifact in tract)."""

    ids: list[int]
    text: str
    encoded: list[np.ndarray]
    """Per chunk, ``[d_model, frames]``: the valid encoded frames of that step."""
    step_seconds: list[float]
    predictions: list[int] = attrs.field(factory=list)
    """CTC: the best label of every encoded frame, before merging (NeMo's
    ``greedy_predictions``); empty for a transducer."""


class StreamingTranscriber:
    """One utterance streamed through the step artifacts: audio as it arrives with
    :meth:`feed` and :meth:`finish`, or windows in order with :meth:`step`; the caches,
    the decoder's state and the frames a later chunk needs are kept between calls. ``decoder``
    is ``"ctc"``, ``"rnnt"`` or ``"none"`` (encode only); by default the export's (a
    hybrid model's transducer)."""

    def __init__(self, asr: AsrArtifacts, decoder: str | None = None) -> None:
        facts = asr.manifest.data.get(SECTION)
        if not isinstance(facts, Mapping):
            raise NemoManifestError(f"{asr.manifest.folder} is not a streaming export (its manifest has no "
                                    f"{SECTION!r} section): export it with t2n.nemo.export_streaming_asr")
        self.asr = asr
        self.facts = facts
        self.first = StepShape.from_manifest(facts["steps"]["first"])
        self.later = StepShape.from_manifest(facts["steps"]["next"])
        greedy = str(asr.manifest.decoding["greedy"]) if decoder is None else decoder
        if greedy not in ("ctc", "rnnt", "none"):
            raise NemoManifestError(f"streaming decodes with 'ctc' or 'rnnt' (or 'none': the encoded frames "
                                    f"only), not {greedy!r}: TDT's streaming greedy loop is not followed yet; "
                                    "a hybrid TDT model streams with decoder='ctc'")
        if greedy == "ctc" and "ctc_decoder" not in asr.manifest.artifacts:
            raise NemoManifestError("the export has no CTC head (ctc_decoder); decode with 'rnnt'")
        if greedy == "rnnt" and "joint" not in asr.manifest.artifacts:
            raise NemoManifestError("the export has no transducer (decoder, joint); decode with 'ctc'")
        self.decoder = greedy
        self.keep_windows = False
        """Keep the windows :meth:`feed` runs in :attr:`fed` (to compare them with NeMo's)."""
        self.reset()

    def reset(self) -> None:
        """Back to the start of an utterance: the initial caches, nothing decoded."""
        cache = self.facts["cache"]
        self.caches = {name: np.full(spec["shape"], spec["value"], dtype=DType(spec["dtype"]).numpy)
                       for name, spec in cache["initial"].items()}
        self.predictions: list[int] = []
        self.labels: list[int] = []
        self._rnnt: _TransducerState | None = None
        self._audio: tuple[FeatureStream, FrameChunker] | None = None
        self.encoded: list[np.ndarray] = []
        """Per chunk streamed by :meth:`feed`, its valid encoded frames."""
        self.fed: list[Window] = []
        """The windows :meth:`feed` and :meth:`finish` ran, when :attr:`keep_windows` is set."""

    # -- audio as it arrives -------------------------------------------------------------
    def feed(self, samples: np.ndarray) -> list[int]:
        """Append ``samples`` (any number) of the utterance: the frames they complete are
        computed, every chunk they complete runs through the encoder step and is decoded;
        the label ids decoded by this call. :class:`~t2n.errors.NemoExportError` if the
        model's features need the whole utterance (``normalize: per_feature``)."""
        features, chunker = self._streams()
        return self._run(chunker.push(features.push(samples)))

    def finish(self) -> list[int]:
        """The end of the utterance: the last frames (NeMo's end padding) and chunks; the
        ids they add. :meth:`reset` starts the next utterance."""
        features, chunker = self._streams()
        return self._run(chunker.push(features.finish(), last=True))

    def _streams(self) -> tuple[FeatureStream, FrameChunker]:
        if self._audio is None:
            features = FeatureStream(self.asr, self.facts["features"])
            self._audio = features, FrameChunker(self.first, self.later, features.rows)
        return self._audio

    def _run(self, windows: Sequence[Window]) -> list[int]:
        before = len(self.labels)
        for window in windows:
            self.encoded.append(self.step(window))
            if self.keep_windows:
                self.fed.append(window)
        return self.labels[before:]

    # -- the stages ----------------------------------------------------------------------
    def stream_features(self, audio: np.ndarray, *, source: str = "the audio") -> np.ndarray:
        """The features NeMo's buffer streams for one utterance: the preprocessor's on the
        whole audio, and its last frame (the pad value)."""
        features = self.asr.features(audio, source=source)
        pad = np.full((features.shape[0], 1), float(self.facts["features"]["pad_value"]), np.float32)
        return np.concatenate([features, pad], axis=1)

    def windows(self, features: np.ndarray, *, source: str = "the features") -> Iterator[Window]:
        """The step windows of ``features`` [features, frames] (:func:`windows`)."""
        features = np.asarray(features, np.float32)
        rows = int(self.asr.manifest.data["audio"]["features"])
        if features.ndim != 2 or features.shape[0] != rows:
            raise NemoAudioError(source, f"features of shape {list(features.shape)}; the encoder step takes "
                                         f"[{rows}, frames] (the model's log-mel features)")
        return windows(features, self.first, self.later)

    def step(self, window: Window) -> np.ndarray:
        """:meth:`encode` one window and :meth:`decode` its frames; its encoded frames."""
        encoded = self.encode(window)
        self.decode(encoded)
        return encoded

    def encode(self, window: Window) -> np.ndarray:
        """Run one window through its step artifact, the caches updated; its valid encoded
        frames ``[d_model, frames]``."""
        cache = self.facts["cache"]
        feed = {"audio_signal": window.features[None], "length": np.array([window.length], np.int64),
                **self.caches}
        out = self.asr.run(window.step.artifact, feed)
        self.caches = {name: out[nxt] for name, nxt in zip(cache["inputs"], cache["outputs"])}
        valid = int(np.asarray(out["encoded_lengths"]).reshape(-1)[0])
        return np.asarray(out["outputs"])[0, :, :valid]

    def decode(self, encoded: np.ndarray) -> None:
        """Decode one chunk's encoded frames after the ones before (:attr:`ids`)."""
        if encoded.shape[-1] == 0 or self.decoder == "none":
            return
        if self.decoder == "ctc":
            blank = int(self.asr.manifest.decoding["blank_id"])
            best = [int(k) for k in np.argmax(self.asr.ctc_logprobs(encoded), axis=-1).tolist()]
            previous = self.predictions[-1] if self.predictions else blank
            self.labels.extend(ctc_merge(best, blank, previous))
            self.predictions.extend(best)
        else:
            if self._rnnt is None:
                self._rnnt = _TransducerState(self.asr)
            self._rnnt.advance(encoded)
            self.labels = list(self._rnnt.labels)

    @property
    def ids(self) -> list[int]:
        """The label ids decoded so far."""
        return list(self.labels)

    @property
    def text(self) -> str:
        return self.asr.text(self.labels)


def ctc_merge(predictions: Sequence[int], blank: int, previous: int | None = None) -> list[int]:
    """CTC's greedy rule on per-frame labels: repeats merged, blanks dropped; ``previous``
    is the label of the frame before (a chunk's first label repeating it is merged)."""
    out: list[int] = []
    previous = blank if previous is None else previous
    for k in predictions:
        if k != blank and k != previous:
            out.append(k)
        previous = k
    return out


class _TransducerState:
    """NeMo's greedy RNN-T loop, resumable between chunks: the last prediction, the
    prediction network's state and the labels so far (NeMo's partial hypothesis)."""

    def __init__(self, asr: AsrArtifacts) -> None:
        dec = asr.manifest.decoding
        self.asr = asr
        self.blank = int(dec["blank_id"])
        self.max_symbols = dec.get("max_symbols_per_step")
        layers, hidden = dec["decoder_state"]["shape"]
        state = [np.zeros((layers, hidden), np.float32) for _ in range(2)]
        self.prediction, self.state = self._predict(self.blank, state)
        self.labels: list[int] = []

    def advance(self, encoded: np.ndarray) -> None:
        for t in range(encoded.shape[-1]):
            for _ in range(int(self.max_symbols) if self.max_symbols is not None else 1 << 30):
                logits = self.asr._call("joint", {}, {"encoder_outputs": encoded[:, t:t + 1],
                                                      "decoder_outputs": self.prediction})["outputs"]
                k = int(np.argmax(np.asarray(logits).reshape(-1)))
                if k == self.blank:
                    break
                self.labels.append(k)
                self.prediction, self.state = self._predict(k, self.state)

    def _predict(self, label: int, state: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
        axes = {"targets": 0, "input_states_1": 1, "input_states_2": 1, "outputs": 0,
                "output_states_1": 1, "output_states_2": 1}
        out = self.asr._call("decoder", axes, {"targets": np.array([label], np.int32),
                                               "input_states_1": state[0], "input_states_2": state[1]},
                             {"target_length": 1})
        return out["outputs"], [out["output_states_1"], out["output_states_2"]]


def transcribe_stream(export: str | os.PathLike[str] | AsrArtifacts, audio: np.ndarray | None = None, *,
                      features: np.ndarray | None = None, decoder: str | None = None,
                      source: str | None = None) -> StreamResult:
    """Stream one utterance (samples, or the ``features`` NeMo's buffer would stream)
    through a streaming export chunk by chunk: its ids and text as NeMo's
    ``conformer_stream_step`` loop gives them, and per chunk the encoded frames and the
    step's time. ``export`` is the folder or its loaded :class:`AsrArtifacts`."""
    asr = export if isinstance(export, AsrArtifacts) else AsrArtifacts(export)
    streamer = StreamingTranscriber(asr, decoder)
    if features is None:
        if audio is None:
            raise NemoManifestError("give the audio samples, or features=")
        features = streamer.stream_features(audio, source=source or "the audio")
    encoded: list[np.ndarray] = []
    seconds: list[float] = []
    for window in streamer.windows(features, source=source or "the features"):
        began = time.perf_counter()
        frames = streamer.encode(window)
        seconds.append(time.perf_counter() - began)
        streamer.decode(frames)
        encoded.append(frames)
    return StreamResult(streamer.ids, streamer.text, encoded, seconds, list(streamer.predictions))
