"""Classification over a NeMo classifier's export, in tract's Python package (in this
process): what a device does with the artifacts, and how the tests prove they give
NeMo's labels and probabilities.

* features: ``preprocessor`` on the samples (or the application's own features);
* ``encoder`` on the features (it pads them as NeMo's featurizer does);
* ``decoder``: the logits of the utterance, or of every encoded frame;
* probabilities: their softmax (as NeMo's frame VAD and ``transcribe(logprobs=False)``'s
  argmax read them), or the decoder's own when it gives probabilities; the label is
  the most probable one of the model's labels (its config's ``labels``).
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

import attrs
import numpy as np

from t2n.errors import NemoManifestError
from t2n.nemo.audio import read_audio
from t2n.nemo.manifest import CLASSIFIER_FORMAT
from t2n.nemo.runner import ExportRunner


@attrs.frozen(eq=False)
class Classification:
    """One utterance's label: the model's ``labels`` and the ``probabilities`` of each."""

    labels: tuple[str, ...]
    probabilities: np.ndarray
    """``[labels]``, float32."""

    @property
    def index(self) -> int:
        return int(np.argmax(self.probabilities))

    @property
    def label(self) -> str:
        return self.labels[self.index]

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, "index": self.index,
                "probabilities": dict(zip(self.labels, self.probabilities.tolist()))}


@attrs.frozen(eq=False)
class FrameClassification:
    """The label of every encoded frame (``frame_seconds`` of audio each, NeMo's padded
    frames at the end included, as its forward gives them)."""

    labels: tuple[str, ...]
    probabilities: np.ndarray
    """``[frames, labels]``, float32."""
    frame_seconds: float

    @property
    def indices(self) -> list[int]:
        return [int(i) for i in np.argmax(self.probabilities, axis=-1)]

    @property
    def frame_labels(self) -> list[str]:
        return [self.labels[i] for i in self.indices]

    def segments(self) -> list[tuple[float, float, str]]:
        """Runs of frames with one label: ``(start, end, label)``, in seconds."""
        out: list[tuple[float, float, str]] = []
        for i, label in enumerate(self.frame_labels):
            start, end = i * self.frame_seconds, (i + 1) * self.frame_seconds
            if out and out[-1][2] == label:
                out[-1] = (out[-1][0], end, label)
            else:
                out.append((start, end, label))
        return [(round(a, 6), round(b, 6), label) for a, b, label in out]

    def as_dict(self) -> dict[str, Any]:
        return {"frame_seconds": self.frame_seconds, "labels": self.frame_labels,
                "probabilities": self.probabilities.tolist(),
                "segments": [{"start": a, "end": b, "label": label} for a, b, label in self.segments()]}


class ClassifierArtifacts(ExportRunner):
    """The artifacts of a classifier's export folder, loaded in tract when first used."""

    FORMAT: ClassVar[str] = CLASSIFIER_FORMAT
    SHORT_AUDIO: ClassVar[str] = "give longer audio"

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        super().__init__(folder)
        classes = self.manifest.data["classes"]
        self.labels: tuple[str, ...] = tuple(str(v) for v in classes["labels"])
        self.kind = self.manifest.kind
        """``utterance`` or ``frame``."""

    def decode(self, encoded: np.ndarray) -> np.ndarray:
        """The decoder's output for the encoder's ``[d_model, T]``: ``[labels]`` for the
        utterance, or ``[T, labels]``."""
        classes = self.manifest.data["classes"]
        out: np.ndarray = self._call(classes["artifact"], {}, {"encoder_output": encoded})[classes["output"]]
        return out

    def classify(self, audio: np.ndarray | None = None, *, features: np.ndarray | None = None,
                 source: str | None = None) -> Classification | FrameClassification:
        """The labels of one utterance (samples, or ``features`` when the export has no
        preprocessor): a :class:`Classification`, or a :class:`FrameClassification` for a
        frame classifier. ``source`` (a file name) names the audio in errors."""
        if features is None:
            if audio is None:
                raise NemoManifestError("give the audio samples, or features=")
            features = self.features(audio, source=source or "the audio")
        probabilities = self.probabilities(self.decode(self.encode(features, source=source or "the features")))
        if self.kind == "frame":
            return FrameClassification(self.labels, probabilities, float(self.manifest.data["classes"]["frame_seconds"]))
        return Classification(self.labels, probabilities)

    def classify_file(self, path: str | os.PathLike[str]) -> Classification | FrameClassification:
        """:meth:`classify` of an audio file: a PCM ``.wav`` (mono, at the model's sample
        rate) or a ``.npy`` of float samples; any refusal names the file."""
        rate = int(self.manifest.data["audio"]["sample_rate"])
        return self.classify(read_audio(path, rate), source=str(path))

    def probabilities(self, outputs: np.ndarray) -> np.ndarray:
        """The probabilities of the decoder's ``outputs`` (over the last axis)."""
        if self.manifest.data["classes"]["outputs"] == "probabilities":
            return np.asarray(outputs, np.float32)
        x = np.asarray(outputs, np.float64)
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        out: np.ndarray = (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)
        return out


def load_classifier(folder: str | os.PathLike[str]) -> ClassifierArtifacts:
    """The artifacts of a NeMo classifier's export folder (:func:`t2n.nemo.export_classifier`)."""
    return ClassifierArtifacts(folder)
