"""What ``t2n.export`` writes while the model compiles: the model's parameters as the
artifact will hold them (predicted, then confirmed by :mod:`t2n.serialize.overlap`),
PyTorch kept off the writer's core meanwhile, and the record of it in ``artifact.stats``."""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

import attrs
import torch

from t2n.artifact import Artifact
from t2n.backends.nnef.context import label_to_path
from t2n.errors import InvalidArgumentError, T2NError
from t2n.frontend.trace import canonical_tensor_names
from t2n.frontend.weight_guard import unchanged_check
from t2n.ir import DType, TensorData
from t2n.ir.tensor_data import converted
from t2n.options import CompileOptions
from t2n.quant.model import q4_0_scales, with_q4_0
from t2n.quant.q4_0 import is_q4_0
from t2n.serialize.archive import ArtifactWriter
from t2n.serialize.overlap import EarlyWriter, PlannedTensor
from t2n.serialize.torch_io import resolve_weights, weight_source
from t2n.torch_data import tensor_data


def parameter_paths(model: torch.nn.Module) -> list[str]:
    """The member paths of the model's parameters, in module order: the order in which
    an artifact lists its tensors (those it holds), and ``export`` writes them early."""
    return [label_to_path(name) + ".dat" for name, _ in model.named_parameters()]


def planned_tensors(
    model: torch.nn.Module, bf16_as: DType, weights: Mapping[str, TensorData] | None = None
) -> list[PlannedTensor]:
    """The model's parameters as an artifact of it would hold them: the member path of
    their dotted name, their data (``weights[name]`` when given, else their own memory;
    bf16 seen as ``bf16_as``), in module order.

    This is a prediction (a pass may fold or transform a parameter); ``export`` checks it
    against the compiled artifact.
    """
    out: list[PlannedTensor] = []
    scales = q4_0_scales(model)
    for name, p in model.named_parameters():
        path = label_to_path(name) + ".dat"
        unchanged: Callable[[], bool]
        if weights is not None and name in weights:
            data, unchanged = weights[name], _always
        else:
            if p.device.type != "cpu" or p.layout != torch.strided or p.is_conj() or p.is_neg():
                continue
            try:
                version = p._version
                data = tensor_data(p)
            except (RuntimeError, InvalidArgumentError):  # meta or inference tensors, unsupported dtypes
                continue
            # the counter misses writes through `.data` or numpy: sampled values too
            unchanged = unchanged_check(p) or functools.partial(_same_version, p, version)
        data = with_q4_0(scales, p, data, name)  # a weight t2n.quantize made Q4_0: written as blocks
        written = bf16_as if data.dtype is DType.BF16 else data.dtype  # as the bf16-as pass retypes it
        if data.dtype is DType.BF16 and not is_q4_0(data):
            data = converted(data, bf16_as)
        out.append(PlannedTensor(path, data, written, unchanged))
    return out


def _always() -> bool:
    return True


def _same_version(t: torch.Tensor, version: int) -> bool:
    return t._version == version


def written_by_forward(artifact: Artifact) -> set[str]:
    """Member paths of the parameters the traced call wrote (through ``.data`` too, which
    their version counter does not see): what was written early of them may be the
    value from before the call, so they are always written again."""
    return {label_to_path(name) + ".dat" for name in artifact.stats.get("state_written", ())}


def plan(model: torch.nn.Module, options: CompileOptions) -> tuple[list[PlannedTensor], CompileOptions]:
    """What ``export`` writes early, and the options to compile with: a ``weights_from``
    source is opened here, once, and handed to the compile in them, so both see the same
    lazy tensors."""
    bf16_as = options.target.bf16_as
    if options.weights_from is None:
        return planned_tensors(model, bf16_as), options
    source = weight_source(options.weights_from)
    options = attrs.evolve(options, weights_from=source)
    try:
        weights = resolve_weights(model, source, canonical_tensor_names(model, ""))
    except T2NError:  # the compile reports it
        return [], options
    return planned_tensors(model, bf16_as, weights), options


@contextlib.contextmanager
def one_core_left(writing: bool) -> Iterator[None]:
    """While weights are written beside the compile, PyTorch computes (the trace's
    forward pass) on one thread fewer than the CPUs: its parallel kernels wait for their
    slowest thread, so a thread sharing a core with the writer slows every kernel (the
    16-layer Llama's trace takes 1.5 s instead of 0.8 s on 2 cores; 1.1 s with one
    thread)."""
    before = torch.get_num_threads()
    cpus = os.cpu_count() or 1
    if writing and before >= cpus > 1:
        torch.set_num_threads(cpus - 1)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def record_export(artifact: Artifact, writer: ArtifactWriter, planned: Sequence[PlannedTensor],
                  early: EarlyWriter | None, t_start: float, t_compiled: float) -> None:
    """What ``export`` wrote, when, and how much of it while compiling, in ``artifact.stats``."""
    artifact.stats["bytes_written"] = writer.bytes_written
    timings = artifact.stats.setdefault("timings", {})
    timings["save"] = time.perf_counter() - t_compiled
    timings["export"] = time.perf_counter() - t_start
    artifact.stats["overlap"] = {
        "planned": len(planned),
        "kept": early.kept if early is not None else 0,
        "kept_bytes": early.kept_bytes if early is not None else 0,
        "written_early": len(early.written) if early is not None else 0,
    }
    if writer.compressor_name:
        artifact.stats["compressor"] = writer.compressor_name
