"""``t2n.nemo.export_classifier``: a NeMo speech classifier (speech commands, VAD) as the
artifacts a device runs beside a recognizer's, made as :func:`t2n.nemo.export_asr` makes
those (compiled, remodelled for one utterance, checked in tract against NeMo at two
sizes, listed in ``manifest.json``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs

from t2n.artifact import Artifact
from t2n.backends.target import Target
from t2n.backends.tract.target import TractNNEF
from t2n.check.compare import Tolerance
from t2n.nemo.classifier import ClassifierFacts, classifier_facts
from t2n.nemo.classifier_subnets import (
    classifier_decoder_subnet,
    classifier_plans,
    padded_encoder_subnet,
)
from t2n.nemo.classifier_verify import verify_classifier
from t2n.nemo.export import (
    check_destination,
    check_plan_names,
    save_subnets,
    source_name,
    write_folder,
)
from t2n.nemo.lengths import CHECK_SAMPLES, audio_span
from t2n.nemo.manifest import CLASSIFIER_FORMAT, FILE, VERSION, Manifest
from t2n.nemo.model import load_model
from t2n.nemo.subnets import Subnet, preprocessor_subnet
from t2n.remodel.plan import as_plan
from t2n.serialize.destination import check_name_length
from t2n.version import __version__


@attrs.frozen
class ClassifierExport:
    """What :func:`export_classifier` wrote: the folder, its manifest and the artifacts."""

    path: Path
    manifest: Manifest
    artifacts: dict[str, Artifact]


def export_classifier(model: Any, out: str | os.PathLike[str], *, preprocessor: bool = True, plan: Any = None,
                      remodel: bool = True, target: Target | None = None, check: bool = True,
                      tolerance: Tolerance | str = Tolerance.APPROXIMATE, overwrite: bool = False,
                      seed: int = 0, max_audio_seconds: float | None = None) -> ClassifierExport:
    """Export the NeMo classifier ``model`` (``EncDecClassificationModel`` or
    ``EncDecFrameClassificationModel``: a model, a ``.nemo`` file, a YAML config or a
    config mapping, built with random weights seeded by ``seed``) into the folder ``out``:
    ``preprocessor.nnef.tgz`` (audio samples to log-mel features, the recognizer's),
    ``encoder.nnef.tgz`` (the valid features, NeMo's padding of them put back, to all the
    encoded frames NeMo's decoder sees) and ``decoder.nnef.tgz`` (to the labels' logits of
    the utterance, or of every frame), and ``manifest.json`` (``classes``: the model's
    labels, what the decoder gives, a frame's length).

    The options are :func:`t2n.nemo.export_asr`'s. With ``check``, the artifacts chained
    in tract on two synthetic utterances give the outputs of the model's own ``forward``
    (``CheckMismatchError`` otherwise). A speech recognizer, or a classifier whose parts
    its artifacts would not compute as NeMo does, is refused
    (:class:`~t2n.errors.NemoExportError`, naming what to do) before anything is written.
    """
    dest = Path(out)
    check_name_length(dest)
    check_destination(dest, overwrite)
    target = target if target is not None else TractNNEF()
    tolerance = Tolerance.parse(tolerance)
    user_plan = as_plan(plan) if plan is not None else None
    source = source_name(model)
    nemo_model = load_model(model, seed=seed)
    facts = classifier_facts(nemo_model)
    span = audio_span(nemo_model.encoder, facts, max_audio_seconds)
    subnets = _subnets(nemo_model, facts, preprocessor, span.max_frames)
    check_plan_names(user_plan, [s.name for s in subnets])
    plans = classifier_plans(facts, [s.name for s in subnets], span.max_frames) if remodel else {}

    def fill(tmp: Path) -> tuple[dict[str, Artifact], dict[str, Any]]:
        artifacts, entries = save_subnets(tmp, subnets, plans, user_plan, target, tolerance=tolerance, check=check)
        data = {"format": CLASSIFIER_FORMAT, "version": VERSION, "t2n_version": __version__,
                "target": str(target), "model": {"class": facts.class_name, "kind": facts.kind, "source": source},
                "audio": _audio(facts, preprocessor), "classes": _classes(facts), "artifacts": entries}
        (tmp / FILE).write_text(Manifest(data).to_json())
        if check:
            data["checked_against_nemo"] = verify_classifier(nemo_model, tmp, preprocessor=preprocessor,
                                                             tolerance=tolerance)
            (tmp / FILE).write_text(Manifest(data).to_json())
        return artifacts, data

    artifacts, data = write_folder(dest, overwrite, fill)
    return ClassifierExport(dest, Manifest(data, dest), artifacts)


def _subnets(model: Any, facts: ClassifierFacts, preprocessor: bool, max_frames: int | None) -> list[Subnet]:
    """The sub-networks to export, in the order audio flows through them."""
    hop = max(facts.hop_length, 1)
    frames = [max(n // hop, 2 * facts.subsampling_factor) for n in (CHECK_SAMPLES, 8000 + 13)]
    out = [preprocessor_subnet(model.preprocessor)] if preprocessor else []
    out.append(padded_encoder_subnet(model.encoder, facts, frames, max_frames))
    out.append(classifier_decoder_subnet(model.decoder, facts))
    return out


def _audio(facts: ClassifierFacts, preprocessor: bool) -> dict[str, Any]:
    return {"sample_rate": facts.sample_rate, "features": facts.features, "hop_length": facts.hop_length,
            "subsampling_factor": facts.subsampling_factor, "preprocessor": preprocessor,
            "pad_to": facts.pad_to, "pad_value": facts.pad_value}


def _classes(facts: ClassifierFacts) -> dict[str, Any]:
    return {"labels": list(facts.labels), "outputs": facts.outputs, "frame_seconds": facts.frame_seconds,
            "artifact": "decoder", "output": "outputs" if facts.kind == "frame" else "logits"}
