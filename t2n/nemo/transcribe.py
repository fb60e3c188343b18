"""Greedy transcription over a NeMo export, in tract's Python package (in this process):
what an application does with the artifacts, and how the tests prove they transcribe as
NeMo does.

* features: ``preprocessor`` on the samples (or the application's own features);
* ``encoder`` on the features;
* CTC: ``ctc_decoder``, the best label of each frame, repeats merged, blanks dropped;
* transducers: starting from the blank label and zero states, the ``joint`` of the current
  frame and the last prediction gives the best label; a label (not blank) is emitted and
  fed to ``decoder`` for the next prediction; a blank moves to the next frame, as does the
  ``max_symbols_per_step``-th label of a frame. TDT models also choose a duration (the
  frames to advance; a blank advances at least one), as NeMo's greedy batched decoding
  (its default) does.

Artifacts exported with NeMo's batched interface (``remodel=False``) are run with a
batch of one and their lengths given, so both forms transcribe alike.

Audio is checked before tract runs: one channel of float samples, as long as the
manifest's bounds allow (:class:`~t2n.nemo.audio.AudioLimits`: at least one feature frame,
at most the longest audio the export was made for); a refusal is a typed
:class:`~t2n.errors.NemoAudioError` naming the file, and a failure inside tract an
:class:`~t2n.errors.EngineError` with tract's message, never its backtrace. The text of
the ids is NeMo's (:mod:`t2n.nemo.text`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from t2n.errors import NemoManifestError
from t2n.nemo.audio import read_audio
from t2n.nemo.runner import ExportRunner, engine_message
from t2n.nemo.text import Detokenizer

__all__ = ["AsrArtifacts", "engine_message", "load"]


class AsrArtifacts(ExportRunner):
    """The artifacts of a recognizer's export folder, loaded in tract when first used."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        super().__init__(folder)
        self.detokenizer = Detokenizer.from_decoding(self.manifest.decoding)

    def transcribe(self, audio: np.ndarray | None = None, *, features: np.ndarray | None = None,
                   decoder: str | None = None, source: str | None = None) -> list[int]:
        """The label ids greedy decoding gives for one utterance (samples, or ``features``
        when the export has no preprocessor); ``decoder="ctc"`` decodes a hybrid model
        with its CTC head instead of its transducer. ``source`` (a file name) names the
        audio in errors."""
        if features is None:
            if audio is None:
                raise NemoManifestError("give the audio samples, or features=")
            features = self.features(audio, source=source or "the audio")
            encoded = self.encode(features, source=source or "the audio")
        else:
            encoded = self.encode(features, source=source or "the features")
        greedy = self.manifest.decoding["greedy"] if decoder is None else decoder
        if greedy == "ctc":
            return self.ctc_greedy(encoded)
        if greedy in ("rnnt", "tdt"):
            return self.transducer_greedy(encoded)
        raise NemoManifestError(f"unknown decoder {greedy!r} (ctc, rnnt or tdt)")

    def transcribe_file(self, path: str | os.PathLike[str], *, decoder: str | None = None) -> list[int]:
        """:meth:`transcribe` of an audio file: a PCM ``.wav`` (mono, at the model's sample
        rate) or a ``.npy`` of float samples; any refusal names the file."""
        rate = int(self.manifest.data["audio"]["sample_rate"])
        return self.transcribe(read_audio(path, rate), decoder=decoder, source=str(path))

    def text(self, ids: Sequence[int]) -> str:
        """The text of label ids as NeMo's decoding writes it (``transcribe()``'s text:
        SentencePiece's or the characters' rules, see :mod:`t2n.nemo.text`)."""
        return self.detokenizer.text(ids)

    # -- decoding ------------------------------------------------------------------------
    def ctc_logprobs(self, encoded: np.ndarray) -> np.ndarray:
        """The CTC head's log-probabilities ``[T, labels]`` of the encoder's output."""
        return self._call("ctc_decoder", {}, {"encoder_output": encoded})["logprobs"]

    def ctc_greedy(self, encoded: np.ndarray) -> list[int]:
        logprobs = self.ctc_logprobs(encoded)
        blank = int(self.manifest.decoding["blank_id"])
        out: list[int] = []
        previous = blank
        for k in np.argmax(logprobs, axis=-1).tolist():
            if k != blank and k != previous:
                out.append(int(k))
            previous = k
        return out

    def transducer_greedy(self, encoded: np.ndarray) -> list[int]:
        dec = self.manifest.decoding
        blank, durations = int(dec["blank_id"]), [int(d) for d in dec.get("durations") or ()]
        max_symbols = dec.get("max_symbols_per_step")
        layers, hidden = dec["decoder_state"]["shape"]
        state = [np.zeros((layers, hidden), np.float32) for _ in range(2)]
        prediction, state = self._predict(blank, state)
        frames = encoded.shape[-1]
        out: list[int] = []
        t, emitted_at, count = 0, -1, 0
        while t < frames:
            logits = self._call("joint", {}, {"encoder_outputs": encoded[:, t:t + 1],
                                              "decoder_outputs": prediction})["outputs"].reshape(-1)
            labels = logits[:len(logits) - len(durations)] if durations else logits
            k = int(np.argmax(labels))
            skip = durations[int(np.argmax(logits[len(labels):]))] if durations else (1 if k == blank else 0)
            if k == blank:
                t += max(skip, 1)
                continue
            out.append(k)
            count = count + 1 if emitted_at == t else 1
            emitted_at = t
            prediction, state = self._predict(k, state)
            t += skip
            if max_symbols is not None and t == emitted_at and count >= int(max_symbols):
                t += 1
        return out

    def _predict(self, label: int, state: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
        axes = {"targets": 0, "input_states_1": 1, "input_states_2": 1, "outputs": 0,
                "output_states_1": 1, "output_states_2": 1}
        out = self._call("decoder", axes, {"targets": np.array([label], np.int32), "input_states_1": state[0],
                                           "input_states_2": state[1]}, {"target_length": 1})
        return out["outputs"], [out["output_states_1"], out["output_states_2"]]


def load(folder: str | os.PathLike[str] | Path) -> AsrArtifacts:
    """The artifacts of a NeMo export folder (:func:`t2n.nemo.export_asr`)."""
    return AsrArtifacts(folder)
