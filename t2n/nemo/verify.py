"""A NeMo export checked against NeMo's own model, never against the wrappers t2n traced:
the artifacts run in tract one after the other as a transcriber runs them (audio →
features → encoder → CTC head), on synthetic utterances of two lengths, and each stage's
output is compared with what the model's ``preprocessor`` / ``forward`` / ``ctc_decoder``
give (:mod:`t2n.reference.nemo_asr`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from t2n.check.compare import Tolerance, compare
from t2n.errors import CheckMismatchError
from t2n.nemo.lengths import CHECK_SAMPLES
from t2n.reference.nemo_asr import nemo_outputs, synthetic_utterance

LOG = logging.getLogger(__name__)

UTTERANCES = ((CHECK_SAMPLES, 1), (8000 + 13, 2))
"""(samples at 16 kHz, seed) of the utterances checked."""


def _tract_outputs(asr: Any, features: np.ndarray, audio: np.ndarray, *, preprocessor: bool,
                   ctc: bool) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    if preprocessor:
        features = out["features"] = asr.features(audio)
    out["encoded"] = asr.encode(features)
    if ctc:
        out["logprobs"] = asr.ctc_logprobs(out["encoded"])
    return out


def verify_asr(model: Any, folder: Path, *, preprocessor: bool, tolerance: Tolerance | str) -> list[dict[str, Any]]:
    """Run the export in ``folder`` (manifest written) in tract against ``model``; a report
    per utterance, or :class:`~t2n.errors.CheckMismatchError` naming the stage and the gap."""
    from t2n.nemo.transcribe import AsrArtifacts

    asr = AsrArtifacts(folder)
    reports = []
    for samples, seed in UTTERANCES:
        audio = synthetic_utterance(samples, seed)
        expected = nemo_outputs(model, audio)
        got = _tract_outputs(asr, expected["features"], audio, preprocessor=preprocessor, ctc="logprobs" in expected)
        names = list(got)
        report = compare("tract (the artifacts chained)", names, [got[n] for n in names],
                         [expected[n] for n in names], tolerance)
        LOG.info("checked the artifacts on %d samples against %s:\n%s", samples, type(model).__name__, report)
        if not report.ok:
            stage = next(o.name for o in report.outputs if not o.ok)
            raise CheckMismatchError(
                f"{report}\nOn an utterance of {samples} samples, the exported {stage} differs from what "
                f"{type(model).__name__}'s own modules compute (preprocessor, forward, CTC head); nothing was "
                "written: report the model and the nemo-toolkit version", report)
        reports.append({"utterance_samples": samples, "max_abs": report.max_abs, "tolerance": str(report.tolerance.value)})
    return reports
