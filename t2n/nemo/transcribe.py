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
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from t2n.errors import NemoManifestError
from t2n.ir import DType
from t2n.nemo.manifest import Manifest


class AsrArtifacts:
    """The artifacts of an export folder, loaded in tract when first used."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.manifest = Manifest.load(folder)
        self._runnables: dict[str, Any] = {}

    # -- running one artifact ----------------------------------------------------------
    def _runnable(self, name: str) -> Any:
        if name not in self._runnables:
            import tract

            from t2n.backends.tract.child import _loader

            self._runnables[name] = _loader(tract, []).load(str(self.manifest.path_of(name))).into_runnable()
        return self._runnables[name]

    def run(self, name: str, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run artifact ``name`` on inputs given by name (in the shapes and dtypes of its
        manifest interface); its outputs by name."""
        import tract

        from t2n.backends.tract.child import _to_numpy, _to_value

        entry = self.manifest.artifact(name)
        missing = [n for n in entry.input_names if n not in inputs]
        if missing:
            raise NemoManifestError(f"{name} needs the inputs {', '.join(missing)}")
        arrays = [np.ascontiguousarray(np.asarray(inputs[n]).astype(DType(entry.input_dtype(n)).numpy)) for n in entry.input_names]
        outputs = self._runnable(name).run([_to_value(tract, np, x) for x in arrays])
        return {n: np.asarray(_to_numpy(tract, np, o)) for n, o in zip(entry.output_names, outputs)}

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
    def features(self, audio: np.ndarray) -> np.ndarray:
        """Log-mel features ``[features, frames]`` of one utterance ``[samples]``."""
        audio = np.asarray(audio, dtype=np.float32).reshape(-1)
        out = self._call("preprocessor", {}, {"input_signal": audio}, {"length": audio.shape[0]})
        return out["processed_signal"]

    def encode(self, features: np.ndarray) -> np.ndarray:
        """The encoder's output ``[d_model, T]`` for features ``[features, frames]``."""
        out = self._call("encoder", {}, {"audio_signal": features}, {"length": features.shape[-1]})
        return out["outputs"]

    def transcribe(self, audio: np.ndarray | None = None, *, features: np.ndarray | None = None,
                   decoder: str | None = None) -> list[int]:
        """The label ids greedy decoding gives for one utterance (samples, or ``features``
        when the export has no preprocessor); ``decoder="ctc"`` decodes a hybrid model
        with its CTC head instead of its transducer."""
        if features is None:
            if audio is None:
                raise NemoManifestError("give the audio samples, or features=")
            features = self.features(audio)
        encoded = self.encode(features)
        greedy = self.manifest.decoding["greedy"] if decoder is None else decoder
        if greedy == "ctc":
            return self.ctc_greedy(encoded)
        if greedy in ("rnnt", "tdt"):
            return self.transducer_greedy(encoded)
        raise NemoManifestError(f"unknown decoder {greedy!r} (ctc, rnnt or tdt)")

    def text(self, ids: Sequence[int]) -> str:
        """The text of label ids, by the manifest's vocabulary (word pieces joined)."""
        vocabulary = self.manifest.decoding["vocabulary"]
        pieces = "".join(vocabulary[i] for i in ids)
        return pieces.replace("\u2581", " ").strip() if "\u2581" in pieces else pieces

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
