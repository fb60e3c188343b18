"""A classifier's export checked against NeMo's own model, never against the wrappers t2n
traced: the artifacts run in tract one after the other (audio → features → encoder →
decoder) on synthetic utterances of two lengths, and give what the model's own
``preprocessor`` and ``forward`` give: the features, and the logits of the utterance or
of every frame (NeMo's padded frames included)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch

from t2n.check.compare import Tolerance, compare
from t2n.errors import CheckMismatchError
from t2n.nemo.verify import UTTERANCES
from t2n.reference.nemo_asr import synthetic_utterance

LOG = logging.getLogger(__name__)


@torch.no_grad()
def nemo_classifier_outputs(model: Any, audio: np.ndarray) -> dict[str, np.ndarray]:
    """NeMo's ``features`` ``[features, frames]`` (the valid frames) of one utterance and
    its ``forward``'s ``outputs``: ``[labels]`` for an utterance classifier, ``[T, labels]``
    for a frame classifier."""
    signal = torch.as_tensor(np.asarray(audio, np.float32))[None]
    length = torch.tensor([signal.shape[1]])
    features, frames = model.preprocessor(input_signal=signal, length=length)
    outputs = model.forward(input_signal=signal, input_signal_length=length)
    return {"features": features[0, :, :int(frames[0])].numpy(), "outputs": outputs[0].numpy()}


def verify_classifier(model: Any, folder: Path, *, preprocessor: bool,
                      tolerance: Tolerance | str) -> list[dict[str, Any]]:
    """Run the export in ``folder`` (manifest written) in tract against ``model``; a report
    per utterance, or :class:`~t2n.errors.CheckMismatchError` naming the stage and the gap."""
    from t2n.nemo.classify import ClassifierArtifacts

    runner = ClassifierArtifacts(folder)
    reports = []
    for samples, seed in UTTERANCES:
        expected = nemo_classifier_outputs(model, synthetic_utterance(samples, seed))
        got = {}
        if preprocessor:
            got["features"] = runner.features(synthetic_utterance(samples, seed))
        got["outputs"] = runner.decode(runner.encode(got.get("features", expected["features"])))
        names = list(got)
        report = compare("tract (the artifacts chained)", names, [got[n] for n in names],
                         [expected[n] for n in names], tolerance)
        LOG.info("checked the artifacts on %d samples against %s:\n%s", samples, type(model).__name__, report)
        if not report.ok:
            stage = next(o.name for o in report.outputs if not o.ok)
            raise CheckMismatchError(
                f"{report}\nOn an utterance of {samples} samples, the exported {stage} differs from what "
                f"{type(model).__name__}'s own preprocessor and forward compute; nothing was written: report the "
                "model and the nemo-toolkit version", report)
        reports.append({"utterance_samples": samples, "max_abs": report.max_abs,
                        "tolerance": str(report.tolerance.value)})
    return reports
