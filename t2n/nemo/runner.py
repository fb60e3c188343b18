"""Running the artifacts of a NeMo export folder in tract's Python package (in this
process): what a recognizer (:mod:`t2n.nemo.transcribe`) and a classifier
(:mod:`t2n.nemo.classify`) share, from audio to the encoder's output.

Audio is checked before tract runs: one channel of float samples, as long as the
manifest's bounds allow (:class:`~t2n.nemo.audio.AudioLimits`); a refusal is a typed
:class:`~t2n.errors.NemoAudioError` naming the file, and a failure inside tract an
:class:`~t2n.errors.EngineError` with tract's message, never its backtrace.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from t2n.errors import EngineError, NemoAudioError, NemoManifestError
from t2n.ir import DType
from t2n.nemo.audio import AudioLimits, samples_of
from t2n.nemo.manifest import FORMAT, Manifest


class ExportRunner:
    """The artifacts of an export folder of :attr:`FORMAT`, loaded in tract when first used."""

    FORMAT: ClassVar[str] = FORMAT
    SHORT_AUDIO: ClassVar[str] = "give longer audio, or pad it with silence as NeMo's transcribe() does"
    """What to do with audio shorter than the export accepts."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.manifest = Manifest.load(folder, self.FORMAT)
        self.limits = AudioLimits.from_manifest(self.manifest.data)
        """The lengths of audio (samples, feature frames) the export accepts."""
        self._runnables: dict[str, Any] = {}

    # -- running one artifact ----------------------------------------------------------
    def _runnable(self, name: str) -> Any:
        if name not in self._runnables:
            import tract

            from t2n.backends.tract.child import nnef_loader

            path = self.manifest.path_of(name)
            try:
                self._runnables[name] = nnef_loader(tract, []).load(str(path)).into_runnable()
            except Exception as exc:  # tract's error: its message, not its Rust backtrace
                raise EngineError(f"tract could not load {path}: {engine_message(exc)}; export it again with "
                                  "this t2n and tract", phase="loading") from exc
        return self._runnables[name]

    def run(self, name: str, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run artifact ``name`` on inputs given by name (in the shapes and dtypes of its
        manifest interface); its outputs by name."""
        import tract

        from t2n.backends.tract.child import numpy_of, tract_value_of

        entry = self.manifest.artifact(name)
        missing = [n for n in entry.input_names if n not in inputs]
        if missing:
            raise NemoManifestError(f"{name} needs the inputs {', '.join(missing)}")
        arrays = [np.ascontiguousarray(np.asarray(inputs[n]).astype(DType(entry.input_dtype(n)).numpy))
                  for n in entry.input_names]
        runnable = self._runnable(name)
        try:
            outputs = runnable.run([tract_value_of(tract, np, x) for x in arrays])
        except Exception as exc:  # tract's error: its message, not its Rust backtrace
            shapes = ", ".join(f"{n} {list(x.shape)}" for n, x in zip(entry.input_names, arrays))
            raise EngineError(f"tract could not run the {name} artifact on {shapes}: {engine_message(exc)}",
                              phase="running") from exc
        return {n: np.asarray(numpy_of(tract, np, o)) for n, o in zip(entry.output_names, outputs)}

    def _call(self, name: str, batched_axes: Mapping[str, int], inputs: Mapping[str, np.ndarray],
              lengths: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
        """Run ``name`` on unbatched inputs, whichever interface it was exported with: a
        batch axis is added where the artifact still has one (``batched_axes``: input or
        output name → NeMo's batch axis) and the lengths NeMo's interface wants given."""
        entry = self.manifest.artifact(name)
        rank = {i["name"]: len(i["shape"]) for i in entry.data["inputs"]}
        feed = {}
        for n, x in inputs.items():
            x = np.asarray(x)
            feed[n] = np.expand_dims(x, batched_axes.get(n, 0)) if rank.get(n, x.ndim) == x.ndim + 1 else x
        for n, size in (lengths or {}).items():
            if n in rank:
                feed[n] = np.full((1,) * rank[n], size)
        out = self.run(name, feed)
        nemo_rank = {i["name"]: len(i["shape"]) for i in entry.data["nemo_interface"]["inputs"]}
        batched = any(nemo_rank.get(n) == rank[n] for n in inputs if n in rank)
        return {n: np.squeeze(y, batched_axes.get(n, 0)) if batched else y for n, y in out.items()}

    # -- the stages ----------------------------------------------------------------------
    def features(self, audio: np.ndarray, *, source: str = "the audio") -> np.ndarray:
        """Log-mel features ``[features, frames]`` of one utterance ``[samples]`` (float,
        one channel, of a length the export accepts; ``source`` names it in errors)."""
        audio = samples_of(audio, source)
        self.manifest.artifact("preprocessor")
        self.limits.check_samples(audio.shape[0], source, advice=self.SHORT_AUDIO)
        out = self._call("preprocessor", {}, {"input_signal": audio}, {"length": audio.shape[0]})
        return out["processed_signal"]

    def encode(self, features: np.ndarray, *, source: str = "the features") -> np.ndarray:
        """The encoder's output ``[d_model, T]`` for features ``[features, frames]``."""
        features = np.asarray(features)
        rows = int(self.manifest.data.get("audio", {}).get("features", 0) or 0)
        if features.ndim != 2 or (rows and features.shape[0] != rows):
            raise NemoAudioError(source, f"features of shape {list(features.shape)}; the encoder takes "
                                         f"[{rows or 'features'}, frames] (the model's log-mel features)")
        self.limits.check_frames(features.shape[-1], source)
        out = self._call("encoder", {}, {"audio_signal": features}, {"length": features.shape[-1]})
        return out["outputs"]


def engine_message(exc: BaseException) -> str:
    """What tract said, on one line, without the Rust backtrace it appends."""
    text = str(exc).split("Stack backtrace:")[0]
    lines = [line.strip() for line in text.splitlines() if line.strip() and line.strip() != "Caused by:"]
    out = " ".join(lines) or type(exc).__name__
    return out if len(out) <= 600 else out[:600] + "..."
