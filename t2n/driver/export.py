"""``t2n.export`` with its options checked: compile and save in one call, the model's
parameters written while it compiles (:mod:`t2n.driver.early_write`), atomically (a
failure leaves nothing at the path)."""

from __future__ import annotations

import logging
import time
from typing import Any

import torch

from t2n.artifact import Artifact
from t2n.driver.compile import compile_model
from t2n.driver.early_write import (
    one_core_left,
    parameter_paths,
    plan,
    record_export,
    written_by_forward,
)
from t2n.driver.reading import with_library_extractors
from t2n.options import CompileOptions, WriteOptions
from t2n.serialize.archive import open_writer
from t2n.serialize.dat import dat_size
from t2n.serialize.overlap import EarlyWriter, PlannedTensor
from t2n.serialize.progress import Progress

log = logging.getLogger("t2n")


def export_model(model: Any, args: Any, write: WriteOptions, options: CompileOptions) -> Artifact:
    """Compile ``model`` on ``args`` and write the artifact as ``write`` says; with
    ``options.check_io``, run the saved artifact in the target's engine."""
    path = write.path
    t_start = time.perf_counter()
    writer = open_writer(path, write.compression_level, sync=write.sync, overwrite=write.overwrite)
    early: EarlyWriter | None = None
    try:
        planned: list[PlannedTensor] = []
        if write.overlap and writer.can_rollback and isinstance(model, torch.nn.Module) and \
                not isinstance(model, torch.jit.ScriptModule):
            planned, options = plan(model, with_library_extractors(model, options))
        with Progress(sum(dat_size(t.data, t.dtype) for t in planned), f"writing {path.name}",
                      bar=write.progress) as bar:
            early = EarlyWriter(writer, planned, bar, order=parameter_paths(model)).start() if planned else None
            try:
                with one_core_left(early is not None):
                    artifact = compile_model(model, args, options, check=False)
            except BaseException:
                if early is not None:
                    early.cancel()
                raise
            t_compiled = time.perf_counter()
            tensors = list(artifact.rendered.tensors)
            rest = early.finish(tensors, rewrite=written_by_forward(artifact)) if early is not None else tensors
            members = list(artifact.members(rest))
            bar.set_total(bar.done + sum(size for _, size, _ in members))
            for name, size, chunks in members:
                writer.add_stream(name, size, bar.track(chunks))
            writer.commit()
    except BaseException:
        writer.abort()
        raise
    artifact.saved_path = path
    record_export(artifact, writer, planned, early, t_start, t_compiled)
    log.info("exported %s (%d bytes of members; %s written while compiling)", path, writer.bytes_written,
             artifact.stats["overlap"]["kept_bytes"])
    if options.check_io:
        artifact.check(options.tolerance)
    return artifact
