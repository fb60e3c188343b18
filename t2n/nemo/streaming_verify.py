"""A streaming export checked against NeMo's own streaming loop, never against the
wrappers t2n traced: synthetic utterances go through NeMo's ``conformer_stream_step``
loop (:mod:`t2n.nemo.streaming_reference`) and through the export in tract chunk by chunk
(:mod:`t2n.nemo.streaming`), on the same features; every chunk's encoded frames must
agree within the tolerance, and the label ids and text are compared and recorded. The
preprocessor artifact's features are compared with the ones NeMo's buffer streamed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from t2n.check.compare import Tolerance, compare_one
from t2n.errors import CheckMismatchError
from t2n.nemo.streaming import StreamingTranscriber, transcribe_stream
from t2n.nemo.streaming_reference import nemo_stream
from t2n.nemo.transcribe import AsrArtifacts
from t2n.reference.nemo_asr import synthetic_utterance


def verify_stream(model: Any, folder: Path, *, pad_and_drop_preencoded: bool, tolerance: Tolerance | str,
                  utterances: Sequence[tuple[int, int]]) -> list[dict[str, Any]]:
    """Stream each (samples, seed) utterance through ``folder`` (manifest written) and
    ``model`` with each head the export decodes with; a report per utterance and head,
    or :class:`~t2n.errors.CheckMismatchError`."""
    tol = Tolerance.parse(tolerance)
    asr = AsrArtifacts(folder)
    reports = []
    for samples, seed in utterances:
        audio = synthetic_utterance(samples, seed)
        decoders: list[str | None] = [*stream_decoders(asr)] or [None]
        for decoder in decoders:
            ref = nemo_stream(model, audio, pad_and_drop_preencoded=pad_and_drop_preencoded, decoder=decoder)
            report: dict[str, Any] = {"utterance_samples": samples, "decoder": decoder, "tolerance": tol.value}
            got = transcribe_stream(asr, features=ref.features, decoder=decoder or "none")
            report.update(compare_streams(got.encoded, ref.encoded, tol))
            if report["mismatch"]:
                raise CheckMismatchError(
                    f"On an utterance of {samples} samples streamed in {len(ref.encoded)} chunks, the encoder step "
                    f"artifacts differ from NeMo's conformer_stream_step: {report['mismatch']}; nothing was written: "
                    "report the model and the nemo-toolkit version", report)
            if decoder is not None:
                labels = got.predictions if decoder == "ctc" else got.ids
                report.update(ids_equal=labels == ref.predictions, text_equal=got.text == ref.text)
            if "preprocessor" in asr.manifest.artifacts:
                features = StreamingTranscriber(asr, "none").stream_features(audio)
                report["features_max_abs"] = compare_one("features", features, ref.features, tol).max_abs
            reports.append(report)
    return reports


def stream_decoders(asr: AsrArtifacts) -> list[str]:
    """The heads a streaming export decodes with: CTC, RNN-T, or both for a hybrid model
    (TDT's streaming greedy loop is not followed yet)."""
    kind = asr.manifest.kind
    out = ["rnnt"] if kind in ("rnnt", "hybrid_rnnt_ctc") else []
    return out + (["ctc"] if "ctc_decoder" in asr.manifest.artifacts else [])


def compare_streams(got: Sequence[np.ndarray], ref: Sequence[np.ndarray], tol: Tolerance) -> dict[str, Any]:
    """Chunk by chunk: the number of chunks and of frames, and the largest gap."""
    out: dict[str, Any] = {"chunks": len(ref), "max_abs": 0.0, "mismatch": ""}
    if len(got) != len(ref):
        out["mismatch"] = f"{len(got)} chunks in tract, {len(ref)} in NeMo"
        return out
    for i, (g, r) in enumerate(zip(got, ref)):
        one = compare_one(f"chunk {i}", g, r, tol)
        out["max_abs"] = max(out["max_abs"], float(one.max_abs))
        if not one.ok and not out["mismatch"]:
            out["mismatch"] = f"chunk {i}: {one.note or f'max abs {one.max_abs:.3g}'}"
    return out
