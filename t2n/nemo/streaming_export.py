"""``t2n.nemo.export_streaming_asr``: a cache-aware NeMo Conformer / FastConformer
recognizer as the artifacts an application streams audio through chunk by chunk.

The folder holds what :func:`t2n.nemo.export_asr` writes (preprocessor, whole-utterance
encoder, CTC head or prediction and joint networks), and the encoder's cache-aware step:
``encoder_step.nnef.tgz`` (and ``encoder_step_first.nnef.tgz`` when the first chunk is
not padded, ``pad_and_drop_preencoded=False``). A step is NeMo's ``forward_for_export``
with its caches as explicit inputs and outputs, traced at the chunk's fixed window (a
shorter last chunk is padded and its ``length`` given: fixed shapes load and run fastest
in tract, and NeMo masks the padding). ``manifest.json`` lists the step artifacts with
the others and adds a ``streaming`` section: chunk, shift and pre-encode cache sizes per
step, what is dropped after the subsampling, the caches' names, shapes and initial
values (see :mod:`t2n.nemo.streaming`, which drives them).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import torch

from t2n.api import compile
from t2n.artifact import Artifact
from t2n.backends.target import Target
from t2n.backends.tract.target import TractNNEF
from t2n.check.compare import CheckReport, Tolerance
from t2n.errors import (
    NemoExportError,
    UnsupportedOpsError,
)
from t2n.nemo.export import AsrExport, check_destination, export_asr
from t2n.nemo.manifest import FILE, Manifest
from t2n.nemo.model import load_model
from t2n.nemo.streaming import FIRST_STEP, SECTION, STEP, StepShape
from t2n.nemo.streaming_features import featurizer_facts, whole_utterance_reason
from t2n.nemo.streaming_verify import verify_stream
from t2n.remodel.interface import graph_interface
from t2n.serialize.destination import check_name_length
from t2n.serialize.staging import install, new_temp_dir, remove_path, remove_stale_temps
from t2n.torch_data import ir_dtype

INPUTS = ("audio_signal", "length", "cache_last_channel", "cache_last_time", "cache_last_channel_len")
OUTPUTS = ("outputs", "encoded_lengths", "cache_last_channel_next", "cache_last_time_next",
           "cache_last_channel_next_len")
"""NeMo's export names of the cache-aware encoder (``input_types_for_export``)."""

CHECK_UTTERANCES = ((16000 + 77, 1), (8000 + 13, 2))
"""(samples at 16 kHz, seed) streamed through the export and NeMo's loop at export: last
chunks shorter than the others, padded in the step artifacts."""


class EncoderStep(torch.nn.Module):
    """NeMo's ``forward_for_export`` with caches (batch first): ``audio_signal`` [B,
    features, window] and ``length`` [B] with the three caches give ``outputs`` [B,
    d_model, valid_out_len], ``encoded_lengths`` [B] and the next caches. ``drop`` is the
    ``drop_extra_pre_encoded`` this step uses (NeMo reads it from ``streaming_cfg``, set
    for the call and restored, as ``cache_aware_stream_step`` does)."""

    def __init__(self, encoder: Any, drop: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.drop = drop

    def forward(self, audio_signal: torch.Tensor, length: torch.Tensor, cache_last_channel: torch.Tensor,
                cache_last_time: torch.Tensor, cache_last_channel_len: torch.Tensor) -> tuple[torch.Tensor, ...]:
        cfg = self.encoder.streaming_cfg
        saved = cfg.drop_extra_pre_encoded
        cfg.drop_extra_pre_encoded = self.drop
        try:
            out = self.encoder.forward_for_export(audio_signal, length, cache_last_channel, cache_last_time,
                                                  cache_last_channel_len)
        finally:
            cfg.drop_extra_pre_encoded = saved
        return tuple(out)


# -- what streams and how ------------------------------------------------------------------


def refuse_unstreamable(encoder: Any) -> None:
    """An encoder whose cache-aware step the artifacts would not compute as NeMo's loop
    does: :class:`NemoExportError` saying why and what to do."""
    if not all(hasattr(encoder, a) for a in ("setup_streaming_params", "get_initial_cache_state",
                                             "forward_for_export", "att_context_style")):
        raise NemoExportError("encoder", f"{type(encoder).__name__} is not a cache-aware streaming encoder; "
                                         "t2n.nemo streams NeMo's Conformer and FastConformer encoders "
                                         "(ConformerEncoder) trained with att_context_style chunked_limited: "
                                         "export it whole with t2n.nemo.export_asr")
    style = encoder.att_context_style
    if style != "chunked_limited":
        raise NemoExportError("encoder", f"att_context_style {style!r}: t2n.nemo streams encoders trained for "
                                         "cache-aware streaming (att_context_style chunked_limited, as NeMo's "
                                         "cache-aware FastConformers); a 'regular' encoder keeps look-ahead frames "
                                         "that NeMo recomputes on the last chunk; export it whole with "
                                         "t2n.nemo.export_asr")
    if getattr(encoder, "reduction_position", None) is not None:
        raise NemoExportError("encoder", "the encoder reduces its frames between layers (reduction_position), "
                                         "which NeMo's cache-aware streaming does not support")
    if int(encoder.streaming_cfg.cache_drop_size) != 0:
        raise NemoExportError("encoder", f"the streaming setup drops {encoder.streaming_cfg.cache_drop_size} "
                                         "frames from the caches (a shift shorter than the chunk): NeMo keeps "
                                         "them on the last chunk; export with NeMo's default chunks "
                                         "(att_context_size only)")


@contextlib.contextmanager
def streaming_setup(encoder: Any, att_context_size: Sequence[int] | None) -> Iterator[None]:
    """The encoder set up to stream with ``att_context_size`` (NeMo's
    ``set_default_att_context_size``; by default its current setup) and with
    ``export_cache_support`` off for the whole-utterance export; restored after."""
    saved_context, saved_cfg = list(encoder.att_context_size), encoder.streaming_cfg
    saved_support = getattr(encoder, "export_cache_support", False)
    if att_context_size is not None:
        wanted = [int(x) for x in att_context_size]
        allowed = [list(c) for c in getattr(encoder, "att_context_size_all", [saved_context])]
        if wanted not in allowed:
            raise NemoExportError("encoder", f"att_context_size {wanted} is not one the model was trained with "
                                             f"({', '.join(str(c) for c in allowed)})")
        encoder.set_default_att_context_size(wanted)
    encoder.export_cache_support = False
    try:
        yield
    finally:
        encoder.export_cache_support = saved_support
        if att_context_size is not None:
            encoder.set_default_att_context_size(saved_context)
            encoder.streaming_cfg = saved_cfg


def _pair(value: Any) -> tuple[int, int]:
    """NeMo's first-chunk / later-chunk sizes (a list of two, or one size for both)."""
    if isinstance(value, (list, tuple)):
        return int(value[0]), int(value[1])
    return int(value), int(value)


def step_shapes(encoder: Any, pad_and_drop_preencoded: bool) -> tuple[StepShape, StepShape]:
    """The first and later steps as NeMo's buffer and example loop make them."""
    cfg = encoder.streaming_cfg
    chunk, shift, cache = _pair(cfg.chunk_size), _pair(cfg.shift_size), _pair(cfg.pre_encode_cache_size)
    sampling = encoder.pre_encode.get_sampling_frames() if hasattr(encoder.pre_encode, "get_sampling_frames") \
        else 0
    least = _pair(sampling)
    drop = int(cfg.drop_extra_pre_encoded)
    later = StepShape(STEP, chunk[1], shift[1], cache[1], chunk[1] + cache[1], least[1], drop)
    if pad_and_drop_preencoded:  # the first chunk padded like the others; NeMo still lets it be short
        return attrs.evolve(later, min_chunk_frames=least[0]), later
    first = StepShape(FIRST_STEP, chunk[0], shift[0], cache[0], chunk[0] + cache[0], least[0], 0)
    if (first.window_frames, first.drop_extra_pre_encoded) == (later.window_frames, later.drop_extra_pre_encoded):
        first = attrs.evolve(first, artifact=STEP)
    return first, later


def initial_caches(encoder: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """NeMo's initial caches (zeros), batch first as its export interface takes them."""
    channel, time, length = encoder.get_initial_cache_state(batch_size=1)
    return channel.transpose(0, 1).contiguous(), time.transpose(0, 1).contiguous(), length


def _example(encoder: Any, step: StepShape, which: int) -> tuple[torch.Tensor, ...]:
    """The traced example (``which`` 0: a full window and the initial caches) or the second
    check's (1: a padded last window, random caches as NeMo's ``input_example`` makes)."""
    features = int(encoder._feat_in)
    gen = torch.Generator().manual_seed(61 + which)
    signal = torch.randn(1, features, step.window_frames, generator=gen)
    if which == 0:
        return (signal, torch.tensor([step.window_frames], dtype=torch.int64), *initial_caches(encoder))
    length = max(step.window_frames - step.shift_frames // 2, step.pre_encode_cache_frames + step.min_chunk_frames, 1)
    signal[:, :, length:] = 0
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(71)
        channel, time, cache_length = encoder.get_initial_cache_state(batch_size=1, max_dim=step.window_frames)
    return (signal, torch.tensor([length], dtype=torch.int64), channel.transpose(0, 1).contiguous(),
            time.transpose(0, 1).contiguous(), cache_length)


# -- compiling the steps ----------------------------------------------------------------------


def compile_step(encoder: Any, step: StepShape, target: Target, *, tolerance: Tolerance,
                 check: bool) -> tuple[Artifact, list[dict[str, Any]]]:
    """The step artifact, checked in tract against NeMo's ``forward_for_export`` at the
    traced example and on a padded last window with filled caches."""
    module = EncoderStep(encoder, step.drop_extra_pre_encoded).eval()
    example = _example(encoder, step, 0)
    try:
        with torch.no_grad():
            art = compile(module, example, target, input_names=list(INPUTS), output_names=list(OUTPUTS))
    except UnsupportedOpsError as exc:
        raise NemoExportError(step.artifact, f"t2n cannot export NeMo's cache-aware encoder step for {target}: "
                                             f"{exc}") from exc
    reports: list[dict[str, Any]] = []
    if check:
        reports.append(_report(art.check(tolerance), example))
        second = _example(encoder, step, 1)
        with torch.no_grad():
            expected = [o.numpy() for o in module(*second)]
        inputs = [x.numpy() for x in second]
        reports.append(_report(art.check(tolerance, inputs=inputs, expected=expected), second))
    return art, reports


def _report(report: CheckReport, inputs: Sequence[torch.Tensor]) -> dict[str, Any]:
    return {"engine": report.engine, "tolerance": report.tolerance.value,
            "input_shapes": [list(x.shape) for x in inputs],
            "outputs": [{"name": o.name, "shape": list(o.shape), "max_abs": o.max_abs, "max_rel": o.max_rel}
                        for o in report.outputs]}


def _entry(art: Artifact, step: StepShape, example: Sequence[torch.Tensor],
           reports: list[dict[str, Any]]) -> dict[str, Any]:
    role = ("the first chunk's features (no pre-encode cache) and the initial caches to its encoded frames"
            if step.artifact == FIRST_STEP else
            "a chunk of features with its pre-encode cache frames and the caches to its encoded frames and "
            "the next caches")
    nemo_inputs = [{"name": n, "dtype": ir_dtype(x.dtype).value, "shape": list(x.shape)}
                   for n, x in zip(INPUTS, example)]
    return {"path": f"{step.artifact}.nnef.tgz", "role": role, **graph_interface(art.ir).as_dict(),
            "nemo_interface": {"inputs": nemo_inputs, "outputs": list(OUTPUTS)}, "plan": None, "remodel": {},
            "checks": reports}


def streaming_section(model: Any, first: StepShape, later: StepShape, pad_and_drop_preencoded: bool,
                      preprocessor: bool) -> dict[str, Any]:
    """The manifest's ``streaming`` facts (see :mod:`t2n.nemo.streaming`)."""
    encoder = model.encoder
    cfg = encoder.streaming_cfg
    featurizer = getattr(model.preprocessor, "featurizer", None)
    hop = int(getattr(featurizer, "hop_length", 0) or 0)
    rate = int(getattr(model.preprocessor, "_sample_rate", 16000))
    caches = initial_caches(encoder)
    initial = {name: {"shape": list(x.shape), "dtype": ir_dtype(x.dtype).value, "value": 0}
               for name, x in zip(INPUTS[2:], caches)}
    return {
        "att_context_style": str(encoder.att_context_style),
        "att_context_size": [int(x) for x in encoder.att_context_size],
        "conv_context_size": [int(x) for x in encoder.conv_context_size],
        "pad_and_drop_preencoded": pad_and_drop_preencoded,
        "valid_out_len": int(cfg.valid_out_len),
        "chunk_seconds": later.shift_frames * hop / rate if hop else None,
        "features": features_section(model.preprocessor, preprocessor),
        "steps": {"first": attrs.asdict(first), "next": attrs.asdict(later)},
        "cache": {"inputs": list(INPUTS[2:]), "outputs": list(OUTPUTS[2:]),
                  "last_channel_cache_size": int(cfg.last_channel_cache_size), "initial": initial},
    }


def features_section(nemo_preprocessor: Any, preprocessor: bool) -> dict[str, Any]:
    """How the features are made: by the preprocessor artifact or the application, and
    NeMo's featurizer facts the chunk-by-chunk path needs (``whole_utterance``: why its
    features need the whole utterance, or ``None``)."""
    facts = featurizer_facts(nemo_preprocessor)
    featurizer = getattr(nemo_preprocessor, "featurizer", None)
    return {"source": "preprocessor" if preprocessor else "application",
            "whole_utterance": whole_utterance_reason(facts) if facts else "no NeMo featurizer",
            "pad_value": float(getattr(featurizer, "pad_value", 0.0) or 0.0), **facts}


# -- the export ----------------------------------------------------------------------------


def export_streaming_asr(model: Any, out: str | os.PathLike[str], *, att_context_size: Sequence[int] | None = None,
                         pad_and_drop_preencoded: bool = True, preprocessor: bool = True,
                         target: Target | None = None, check: bool = True,
                         tolerance: Tolerance | str = Tolerance.APPROXIMATE, overwrite: bool = False, seed: int = 0,
                         max_audio_seconds: float | None = None) -> AsrExport:
    """Export the cache-aware NeMo ASR ``model`` (a model, a ``.nemo`` file, a YAML config
    or a config mapping) into the folder ``out`` for streaming: :func:`~t2n.nemo.export_asr`'s
    artifacts and manifest, plus the encoder's step artifact(s) and the manifest's
    ``streaming`` section (:mod:`t2n.nemo.streaming` transcribes with them).

    ``att_context_size`` picks one of the contexts the model was trained with (``[left,
    right]``; the chunk is ``right + 1`` encoded frames), by default its current one.
    ``pad_and_drop_preencoded`` is the choice NeMo's buffer and loop take: the first
    chunk padded like the others (one step artifact) or shorter (a second one). With
    ``check``, each step runs in tract against NeMo's ``forward_for_export``, and
    synthetic utterances streamed through the folder are compared with NeMo's own
    ``conformer_stream_step`` loop (:mod:`t2n.nemo.streaming_reference`): every chunk's
    encoded frames within ``tolerance`` (else :class:`~t2n.errors.CheckMismatchError`),
    the ids and text recorded in the manifest. The other options are ``export_asr``'s.
    The model is left as it was (its context and ``export_cache_support``)."""
    dest = Path(out)
    check_name_length(dest)
    check_destination(dest, overwrite)
    target = target if target is not None else TractNNEF()
    tolerance = Tolerance.parse(tolerance)
    nemo_model = load_model(model, seed=seed)
    encoder = nemo_model.encoder
    refuse_unstreamable(encoder)
    with streaming_setup(encoder, att_context_size):
        refuse_unstreamable(encoder)
        first, later = step_shapes(encoder, pad_and_drop_preencoded)
        dest.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(dest.parent, dest.name)
        tmp = new_temp_dir(dest.parent, dest.name)
        try:
            whole = export_asr(nemo_model, tmp, preprocessor=preprocessor, target=target, check=check,
                               tolerance=tolerance, overwrite=True, seed=seed, max_audio_seconds=max_audio_seconds)
            data = dict(whole.manifest.data)
            artifacts = dict(whole.artifacts)
            data["artifacts"] = dict(data["artifacts"])
            for step in {s.artifact: s for s in (later, first)}.values():
                art, reports = compile_step(encoder, step, target, tolerance=tolerance, check=check)
                art.save(tmp / f"{step.artifact}.nnef.tgz")
                artifacts[step.artifact] = art
                data["artifacts"][step.artifact] = _entry(art, step, _example(encoder, step, 0), reports)
            data[SECTION] = streaming_section(nemo_model, first, later, pad_and_drop_preencoded, preprocessor)
            (tmp / FILE).write_text(Manifest(data).to_json())
            if check:
                data[SECTION]["checked_against_nemo"] = verify_stream(
                    nemo_model, tmp, pad_and_drop_preencoded=pad_and_drop_preencoded, tolerance=tolerance,
                    utterances=CHECK_UTTERANCES)
                (tmp / FILE).write_text(Manifest(data).to_json())
            install(tmp, dest, lambda: check_destination(dest, overwrite))
        except BaseException:
            if tmp.exists():
                remove_path(tmp)
            raise
    return AsrExport(dest, Manifest(data, dest), artifacts)

