"""``t2n.nemo.export_asr``: a NeMo speech recognizer as the artifacts an application
streams audio through, each compiled by ``t2n.compile``, reshaped by its remodel plan,
checked in tract against NeMo at two sizes, and listed in ``manifest.json``."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs
import numpy as np
import torch

from t2n.api import compile
from t2n.artifact import Artifact
from t2n.backends.target import Target
from t2n.backends.tract.target import TractNNEF
from t2n.check.compare import CheckReport, Tolerance
from t2n.errors import NemoExportError, OverwriteRefusedError, UnsupportedOpsError
from t2n.nemo.audio import AudioLimits
from t2n.nemo.lengths import CHECK_SAMPLES, AudioSpan, audio_span
from t2n.nemo.manifest import FILE, FORMAT, VERSION, Manifest, is_export_folder
from t2n.nemo.model import ModelFacts, load_model, model_facts
from t2n.nemo.plans import default_plans
from t2n.nemo.subnets import (
    Subnet,
    ctc_subnet,
    decoder_subnet,
    encoder_subnet,
    joint_subnet,
    preprocessor_subnet,
)
from t2n.nemo.verify import verify_asr
from t2n.remodel.interface import graph_interface
from t2n.remodel.plan import GraphPlan, RemodelPlan, as_plan
from t2n.serialize.destination import check_name_length
from t2n.serialize.staging import install, new_temp_dir, remove_path, remove_stale_temps
from t2n.torch_data import ir_dtype
from t2n.version import __version__

log = logging.getLogger("t2n")


@attrs.frozen
class AsrExport:
    """What :func:`export_asr` wrote: the folder, its manifest and the artifacts (each
    with ``check()`` and the IR, for more checks)."""

    path: Path
    manifest: Manifest
    artifacts: Mapping[str, Artifact]


def subnets_of(model: Any, facts: ModelFacts, preprocessor: bool = True,
               span: AudioSpan | None = None) -> list[Subnet]:
    """The sub-networks to export, in the order audio flows through them; the encoder's
    length tables grown to cover ``span``."""
    out: list[Subnet] = []
    hop = max(facts.hop_length, 1)
    if preprocessor:
        out.append(preprocessor_subnet(model.preprocessor))
    frames = [max(n // hop, 2 * facts.subsampling_factor) for n in (CHECK_SAMPLES, 8000 + 13)]
    out.append(encoder_subnet(model.encoder, facts.features, frames, span, facts.subsampling_factor))
    if facts.kind == "ctc":
        out.append(ctc_subnet(model.decoder, "decoder", facts.d_model))
    if facts.transducer:
        out.append(decoder_subnet(model.decoder, facts.blank_id))
        out.append(joint_subnet(model.joint))
    if facts.kind.startswith("hybrid"):
        out.append(ctc_subnet(model.ctc_decoder, "ctc_decoder", facts.d_model))
    return out


def export_asr(model: Any, out: str | os.PathLike[str], *, preprocessor: bool = True, plan: Any = None,
               remodel: bool = True, target: Target | None = None, check: bool = True,
               tolerance: Tolerance | str = Tolerance.APPROXIMATE, overwrite: bool = False,
               seed: int = 0, max_audio_seconds: float | None = None) -> AsrExport:
    """Export the NeMo ASR ``model`` (a model, a ``.nemo`` file, a YAML config or a config
    mapping, built with random weights seeded by ``seed``) into the folder ``out``:
    ``preprocessor.nnef.tgz`` (audio samples to log-mel features), ``encoder.nnef.tgz``
    (a dynamic number of frames), ``ctc_decoder.nnef.tgz`` for CTC and hybrid models,
    ``decoder.nnef.tgz`` (the prediction network, its LSTM state as inputs and outputs)
    and ``joint.nnef.tgz`` for transducers, and ``manifest.json``.

    Each sub-network is compiled with NeMo's export interface (batch first, lengths as
    inputs), then reshaped by its remodel plan: by default the batch axis is collapsed
    and the lengths are bound to the axis sizes they measure (:mod:`t2n.nemo.plans`);
    ``plan`` (a multi-graph plan mapping, ``RemodelPlan`` or YAML/JSON file, keyed by
    sub-network name) replaces the default plan of the sub-networks it names;
    ``remodel=False`` keeps NeMo's batched interfaces. With ``check``, every artifact
    runs in tract at two sizes and is compared with NeMo's module, and the artifacts run
    one after the other on two synthetic utterances are compared with the model's own
    preprocessor, forward and CTC head (``CheckMismatchError``; see :mod:`t2n.nemo.verify`).
    ``preprocessor=False`` leaves the features to the application.

    ``max_audio_seconds`` is the longest audio the export takes: the encoder's length
    tables (a Conformer's positional table, a Citrinet's squeeze-excitation masks) are
    grown to cover it, as NeMo grows them for long audio, and the encoder's plan bounds
    its frames by it, so longer audio is refused before tract runs
    (:class:`~t2n.errors.AudioLengthError`). By default: what the model's positional
    table covers (NeMo's default ``pos_emb_max_len``, 5000 encoded frames, is 400 s for a
    FastConformer), 400 s for a convolution encoder (:mod:`t2n.nemo.lengths`).

    The folder is written under a temporary name and moved into place when complete;
    an existing ``out`` is replaced only if it is empty or a NeMo export t2n wrote
    (``overwrite=True`` replaces anything). Returns an :class:`AsrExport`.
    """
    dest = Path(out)
    check_name_length(dest)
    check_destination(dest, overwrite)
    target = target if target is not None else TractNNEF()
    tolerance = Tolerance.parse(tolerance)
    user_plan = as_plan(plan) if plan is not None else None
    source = source_name(model)
    nemo_model = load_model(model, seed=seed)
    facts = model_facts(nemo_model)
    span = audio_span(nemo_model.encoder, facts, max_audio_seconds)
    subnets = subnets_of(nemo_model, facts, preprocessor, span)
    names = [s.name for s in subnets]
    check_plan_names(user_plan, names)
    plans = default_plans(facts, names, span.max_frames) if remodel else {}

    def fill(tmp: Path) -> tuple[dict[str, Artifact], dict[str, Any]]:
        artifacts, entries = save_subnets(tmp, subnets, plans, user_plan, target,
                                          tolerance=tolerance, check=check)
        if _plan_for("encoder", {}, user_plan) is not None:
            _check_user_bound(entries, facts, span)
        data = {"format": FORMAT, "version": VERSION, "t2n_version": __version__,
                "target": str(target), "model": {"class": facts.class_name, "kind": facts.kind, "source": source},
                "audio": _audio(facts, preprocessor), "decoding": _decoding(facts), "artifacts": entries}
        (tmp / FILE).write_text(Manifest(data).to_json())
        if check:  # the artifacts chained in tract against NeMo's own model; the manifest says so
            data["checked_against_nemo"] = verify_asr(nemo_model, tmp, preprocessor=preprocessor,
                                                      tolerance=tolerance)
            (tmp / FILE).write_text(Manifest(data).to_json())
        return artifacts, data

    artifacts, data = write_folder(dest, overwrite, fill)
    return AsrExport(dest, Manifest(data, dest), artifacts)


T = TypeVar("T")


def write_folder(dest: Path, overwrite: bool, fill: Callable[[Path], T]) -> T:
    """``fill`` a temporary folder beside ``dest``, then move it into place (refusing what
    t2n did not write there, unless ``overwrite``): a failed export leaves nothing."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(dest.parent, dest.name)
    tmp = new_temp_dir(dest.parent, dest.name)
    try:
        result = fill(tmp)
        install(tmp, dest, lambda: check_destination(dest, overwrite))
    except BaseException:
        if tmp.exists():
            remove_path(tmp)
        raise
    return result


def _check_user_bound(entries: Mapping[str, Any], facts: ModelFacts, span: AudioSpan) -> None:
    """A user's plan for the encoder must bound its frames within what its length tables
    were grown to: beyond them the artifact reads past a table (tract fails, or a mask
    comes out wrong)."""
    if not span.tables or span.max_frames is None:
        return
    limits = AudioLimits.from_manifest({"audio": _audio(facts, False), "artifacts": {"encoder": entries["encoder"]}})
    if limits.max_frames is not None and limits.max_frames <= span.max_frames:
        return
    seconds = span.seconds(facts) or 0.0
    said = f"up to {limits.max_frames}" if limits.max_frames is not None else "any number of"
    raise NemoExportError("encoder", f"the plan lets the encoder take {said} feature frames, but its length tables "
                                     f"cover {span.max_frames} ({seconds:.2f} s of audio); bound the frames in the "
                                     f"plan (extensions: [\"tract_assert frames <= {span.max_frames}\"]) or export "
                                     "with a larger max_audio_seconds")


def check_plan_names(user_plan: RemodelPlan | None, names: list[str]) -> None:
    """A user's plan naming a sub-network this model lacks is a typo or the wrong model:
    refused before anything is compiled."""
    if user_plan is not None:
        unknown = [n for n in user_plan.names if n not in names]
        if unknown:
            raise NemoExportError("model", f"the plan names {', '.join(unknown)}, which this export does not "
                                           f"have (its sub-networks: {', '.join(names)})")


def save_subnets(tmp: Path, subnets: list[Subnet], plans: dict[str, Any], user_plan: RemodelPlan | None,
                 target: Target, *, tolerance: Tolerance,
                 check: bool) -> tuple[dict[str, Artifact], dict[str, Any]]:
    """Each sub-network compiled under its plan, checked, saved into ``tmp``: the artifacts
    and their manifest entries, by sub-network name."""
    artifacts: dict[str, Artifact] = {}
    entries: dict[str, Any] = {}
    for sn in subnets:
        graph_plan = _plan_for(sn.name, plans, user_plan)
        art = _compile(sn, target, graph_plan)
        reports = _check(sn, art, graph_plan, tolerance) if check else []
        path = f"{sn.name}.nnef.tgz"
        art.save(tmp / path)
        artifacts[sn.name] = art
        entries[sn.name] = _entry(sn, art, path, graph_plan, reports)
        log.info("NeMo %s: %s", sn.name, ", ".join(str(i) for i in graph_interface(art.ir).inputs))
    return artifacts, entries


def source_name(model: Any) -> str:
    if isinstance(model, (str, os.PathLike)):
        return Path(model).name
    return "config" if isinstance(model, Mapping) or type(model).__name__ == "DictConfig" else "model"


def check_destination(dest: Path, overwrite: bool) -> bool:
    """Whether something is at ``dest``; refuses what t2n did not write."""
    if not os.path.lexists(dest):
        return False
    if overwrite or (dest.is_dir() and not dest.is_symlink() and (not any(dest.iterdir())
                                                                   or is_export_folder(dest))):
        return True
    raise OverwriteRefusedError(
        f"{dest} holds something that is not a NeMo export t2n wrote; it was left untouched: pass "
        "overwrite=True (--overwrite) to replace it, or choose another folder")


def _plan_for(name: str, plans: Mapping[str, Any], user: RemodelPlan | None) -> GraphPlan | None:
    if user is not None and (name in user.graphs or "" in user.graphs and len(user.graphs) == 1):
        return user.graph(name)
    if name in plans:
        return as_plan({name: plans[name]}).graph(name)
    return None


def _compile(sn: Subnet, target: Target, plan: GraphPlan | None) -> Artifact:
    try:
        with torch.no_grad():
            return compile(sn.module, sn.example(0), target, input_names=list(sn.input_names),
                           output_names=list(sn.output_names), dynamic_axes=sn.axes, remodel=plan)
    except UnsupportedOpsError as exc:
        raise NemoExportError(sn.name, f"t2n cannot export NeMo's {sn.name} ({sn.role}) for {target}: {exc}"
                              + (" (export with preprocessor=False / --no-preprocessor and compute the "
                                 "features in the application)" if sn.name == "preprocessor" else "")) from exc


def _check(sn: Subnet, art: Artifact, plan: GraphPlan | None, tolerance: Tolerance) -> list[dict[str, Any]]:
    """Run the artifact in tract at the traced size and at a second one, against NeMo."""
    reports = [_report(art.check(tolerance), art.example_inputs)]
    if plan is not None and plan.eval_symbols:
        return reports  # its sizes are fixed
    args = sn.example(1)
    with torch.no_grad():
        outs = sn.module(*args)
    outs = outs if isinstance(outs, tuple) else (outs,)
    ins, refs = _after_plan(sn, plan, [a.numpy() for a in args], [o.numpy() for o in outs], art)
    reports.append(_report(art.check(tolerance, inputs=ins, expected=refs), ins))
    return reports


def _after_plan(sn: Subnet, plan: GraphPlan | None, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray],
                art: Artifact) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """NeMo's inputs and outputs in the interface of the remodelled artifact."""
    by_in = dict(zip(sn.input_names, inputs))
    by_out = dict(zip(sn.output_names, outputs))
    if plan is not None:
        for name, ip in plan.inputs.items():
            if name in by_in and ip.collapse_dims:
                by_in[name] = np.squeeze(by_in[name], tuple(_axis(sn, name, a, by_in[name].ndim)
                                                            for a in ip.collapse_dims))
        for name, op in plan.outputs.items():
            if name in by_out and op.collapse_dims:
                axes = tuple(a % by_out[name].ndim for a in op.collapse_dims if isinstance(a, int))
                by_out[name] = np.squeeze(by_out[name], axes)
    return [by_in[n] for n in art.input_names], [by_out[n] for n in art.output_names]


def _axis(sn: Subnet, name: str, axis: int | str, rank: int) -> int:
    if isinstance(axis, int):
        return axis % rank
    found = [i for i, s in sn.axes.get(name, {}).items() if s.lower() == axis.lower()]
    if len(found) != 1:
        raise NemoExportError(sn.name, f"the plan collapses axis {axis} of {name}, which has no such symbol")
    return found[0]


def _report(report: CheckReport, inputs: Sequence[np.ndarray]) -> dict[str, Any]:
    return {"engine": report.engine, "tolerance": report.tolerance.value,
            "input_shapes": [list(np.shape(x)) for x in inputs],
            "outputs": [{"name": o.name, "shape": list(o.shape), "max_abs": o.max_abs, "max_rel": o.max_rel}
                        for o in report.outputs]}


def _entry(sn: Subnet, art: Artifact, path: str, plan: GraphPlan | None,
           reports: list[dict[str, Any]]) -> dict[str, Any]:
    interface = graph_interface(art.ir).as_dict()
    nemo_inputs = []
    for name, x in zip(sn.input_names, sn.example(0)):
        nemo_inputs.append({"name": name, "dtype": ir_dtype(x.dtype).value,
                            "shape": sn.original_shape(name, x.dim())})
    return {"path": path, "role": sn.role, **interface,
            "nemo_interface": {"inputs": nemo_inputs, "outputs": list(sn.output_names)},
            "plan": _plan_mapping(plan), "remodel": dict(art.stats.get("remodel", {})), "checks": reports}


def _plan_mapping(plan: GraphPlan | None) -> dict[str, Any] | None:
    if plan is None:
        return None
    out: dict[str, Any] = {}
    if plan.inputs:
        out["inputs"] = {n: {k: (list(v) if isinstance(v, tuple) and k != "bind_scalar_to_dim_size"
                                 else ".".join(str(p) for p in v) if k == "bind_scalar_to_dim_size" else dict(v)
                                 if isinstance(v, Mapping) else v)
                             for k, v in attrs.asdict(ip, recurse=False).items() if v not in (None, (), {})}
                         for n, ip in plan.inputs.items()}
    if plan.outputs:
        out["outputs"] = {n: {"collapse_dims": list(op.collapse_dims)} for n, op in plan.outputs.items()}
    if plan.renamed_symbols:
        out["renamed_symbols"] = {k: list(v) for k, v in plan.renamed_symbols.items()}
    if plan.outputs_keep is not None:
        out["outputs_keep"] = list(plan.outputs_keep)
    if plan.extensions:
        out["extensions"] = list(plan.extensions)
    return out


def _audio(facts: ModelFacts, preprocessor: bool) -> dict[str, Any]:
    return {"sample_rate": facts.sample_rate, "features": facts.features, "hop_length": facts.hop_length,
            "subsampling_factor": facts.subsampling_factor, "preprocessor": preprocessor}


def _decoding(facts: ModelFacts) -> dict[str, Any]:
    out: dict[str, Any] = {"greedy": "ctc" if facts.kind == "ctc" else "tdt" if "tdt" in facts.kind else "rnnt",
                           "blank_id": facts.blank_id, "vocabulary": list(facts.vocabulary),
                           "text": dict(facts.text)}
    if facts.transducer:
        out.update(max_symbols_per_step=facts.max_symbols, durations=list(facts.durations),
                   decoder_state={"inputs": ["input_states_1", "input_states_2"],
                                  "outputs": ["output_states_1", "output_states_2"],
                                  "shape": [facts.pred_layers, facts.pred_hidden]})
    if facts.kind.startswith("hybrid"):
        out["ctc"] = {"artifact": "ctc_decoder", "blank_id": facts.blank_id}
    return out
