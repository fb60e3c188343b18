"""Log-mel features computed as the audio arrives, with the export's own ``preprocessor``
artifact, equal to the frames NeMo's whole-utterance preprocessor gives (and its
``CacheAwareStreamingAudioBuffer`` cuts into chunks).

NeMo's ``FilterbankFeatures`` (``center=True``, ``pad_mode="constant"``): the signal gets
``n_fft // 2`` zeros on each side, pre-emphasis ``x[t] - preemph * x[t - 1]`` (the first
sample kept), then STFT frame ``t`` covers samples ``[t * hop - n_fft // 2, t * hop +
n_fft // 2)``; each frame's log-mel values depend on that span only. So a frame is
*complete* once the samples up to its span's end have arrived, and any stretch of audio
starting at a multiple of ``hop`` gives exact frames once its first ``m`` frames (whose
span reaches before the stretch, into the artifact's own zero padding and its unfiltered
first sample) are dropped: ``m = ceil((n_fft // 2 + 1) / hop)``. At the end of the audio
the rest is computed on the last stretch with the artifact's right padding, which is
NeMo's end padding; ``get_seq_len`` counts ``(samples + 2 * (n_fft // 2) - n_fft) //
hop`` valid frames, and NeMo's buffer streams one more, the pad value.

This holds only when a frame does not depend on the others: no per-utterance
normalization (cache-aware models use ``normalize: NA``), no frame splicing, and NeMo's
``center`` padding (not ``exact_pad``). Dither is off at inference (NeMo's buffer sets it
to 0, and the traced preprocessor is in eval mode)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from t2n.errors import NemoExportError, NemoManifestError
from t2n.nemo.audio import samples_of

if TYPE_CHECKING:
    from t2n.nemo.transcribe import AsrArtifacts

WHOLE_UTTERANCE_NORMALIZATION = ("per_feature", "all_features")
"""NeMo's ``normalize`` values whose statistics are taken over the whole utterance."""


def featurizer_facts(preprocessor: Any) -> dict[str, Any]:
    """What the chunked path needs from NeMo's featurizer, for the manifest."""
    featurizer = getattr(preprocessor, "featurizer", None)
    if featurizer is None:
        return {}
    normalize = featurizer.normalize
    if normalize is not None and not isinstance(normalize, str):  # fixed_mean / fixed_std: per frame
        normalize = {k: [float(v) for v in np.asarray(normalize[k]).reshape(-1)] for k in normalize}
    return {"hop_length": int(featurizer.hop_length), "n_fft": int(featurizer.n_fft),
            "win_length": int(featurizer.win_length), "preemphasis": featurizer.preemph,
            "normalize": normalize, "frame_splicing": int(featurizer.frame_splicing),
            "exact_pad": bool(featurizer.exact_pad)}


def whole_utterance_reason(facts: Mapping[str, Any]) -> str | None:
    """Why these features cannot be computed chunk by chunk (``None``: they can)."""
    normalize = facts.get("normalize")
    if isinstance(normalize, str) and normalize in WHOLE_UTTERANCE_NORMALIZATION:
        return (f"normalize {normalize!r} normalizes the features over the whole utterance, so no frame is "
                "final before the audio ends (NeMo's cache-aware models use normalize: NA)")
    if int(facts.get("frame_splicing", 1)) > 1:
        return f"frame_splicing {facts['frame_splicing']} stacks each frame with the next ones"
    if facts.get("exact_pad"):
        return "exact_pad pads the signal and masks its last samples by the utterance's length"
    return None


class FeatureStream:
    """One utterance's features as its samples arrive: :meth:`push` some samples, get
    the frames completed by them ``[features, new frames]``; :meth:`finish` gives the
    rest, NeMo's last frame (the pad value) included."""

    def __init__(self, asr: AsrArtifacts, facts: Mapping[str, Any]) -> None:
        if "hop_length" not in facts:
            raise NemoManifestError(f"{asr.manifest.folder}'s streaming section does not describe its featurizer: "
                                    "export it again with this t2n to compute features chunk by chunk")
        if "preprocessor" not in asr.manifest.artifacts:
            raise NemoManifestError("the export has no preprocessor artifact (exported with preprocessor=False): "
                                    "compute the features in the application and use transcribe_stream(features=)")
        why = whole_utterance_reason(facts)
        if why is not None:
            raise NemoExportError("preprocessor", f"its features cannot be computed chunk by chunk: {why}; stream "
                                                  "the whole utterance's features with transcribe_stream instead")
        self.asr = asr
        self.hop = int(facts["hop_length"])
        self.n_fft = int(facts["n_fft"])
        self.pad = self.n_fft // 2
        self.context = -(-(self.pad + 1) // self.hop)
        self.pad_value = float(facts.get("pad_value", 0.0))
        self.rows = int(asr.manifest.data["audio"]["features"])
        self.samples = np.zeros(0, np.float32)
        self.offset = 0
        """The index in the utterance of ``samples[0]`` (a multiple of ``hop``)."""
        self.frames = 0
        """How many frames were given so far."""
        self.finished = False

    @property
    def received(self) -> int:
        return self.offset + self.samples.shape[0]

    def push(self, samples: np.ndarray) -> np.ndarray:
        """Append ``samples`` [n]; the frames now complete (none may be)."""
        if self.finished:
            raise NemoManifestError("the utterance was finished: reset() the streamer before the next one")
        samples = samples_of(samples, "the audio stream")
        self.samples = np.concatenate([self.samples, samples])
        n = self.received
        complete = min((n - self.n_fft + self.pad) // self.hop + 1, (n + 2 * self.pad - self.n_fft) // self.hop)
        return self._frames_until(complete)

    def finish(self) -> np.ndarray:
        """The frames left at the end of the audio, computed with NeMo's end padding,
        and the pad-value frame NeMo's buffer streams after them."""
        if self.finished:
            return np.zeros((self.rows, 0), np.float32)
        valid = max((self.received + 2 * self.pad - self.n_fft) // self.hop, 0)
        tail = self._frames_until(valid)
        self.finished = True
        return np.concatenate([tail, np.full((self.rows, 1), self.pad_value, np.float32)], axis=1)

    def _frames_until(self, end: int) -> np.ndarray:
        """Frames ``[self.frames, end)`` from the kept samples, which start early enough."""
        if end <= self.frames:
            return np.zeros((self.rows, 0), np.float32)
        first = self.offset // self.hop
        out = self.asr._call("preprocessor", {}, {"input_signal": self.samples},
                             {"length": self.samples.shape[0]})["processed_signal"]
        new = np.asarray(out, np.float32)[:, self.frames - first:end - first]
        if new.shape[1] != end - self.frames:
            raise NemoManifestError(f"the preprocessor gave {out.shape[1]} frames for {self.samples.shape[0]} "
                                    f"samples, fewer than the {end - first} its featurizer's facts say")
        self.frames = end
        keep = max(end - self.context, 0) * self.hop  # the next stretch starts here
        self.samples = self.samples[keep - self.offset:]
        self.offset = keep
        return new
