"""``t2n.compile`` with its options checked (:class:`~t2n.options.CompileOptions`): the
model read by its frontend, lowered, the pipeline run, rendered for the target, each
step timed into ``artifact.stats["timings"]``."""

from __future__ import annotations

import logging
from typing import Any

from t2n.artifact import Artifact
from t2n.driver.reading import library_tracing, read_model, with_library_extractors
from t2n.driver.remodel import (
    apply_remodel,
    interface_after_passes,
    remodelled_artifact,
    resized_args,
)
from t2n.driver.stages import (
    gc_paused,
    lower_model,
    make_artifact,
    nonfinite_weights,
    render,
    run_passes,
    timed,
)
from t2n.ir import verify
from t2n.options import CompileOptions
from t2n.serialize.finite import report_nonfinite


@gc_paused
def compile_model(model: Any, args: Any, options: CompileOptions, *, check: bool = True) -> Artifact:
    """The artifact of ``model`` called on ``args``; with ``check`` (and
    ``options.check_io``), run in the target's engine and compared with PyTorch."""
    if options.log_level is not None:
        logging.getLogger("t2n").setLevel(options.log_level)
    options.frontend.check_model(model)
    options = with_library_extractors(model, options)
    args = resized_args(options.remodel, args, options.input_names, options.dynamic_axes)
    timings: dict[str, float] = {}
    with timed(timings, "trace"), library_tracing(model, options):
        read = read_model(model, args, options)
    with timed(timings, "lowering"):
        graph = lower_model(read, options)
    if options.verify_ir:
        verify(graph)
    with timed(timings, "passes"):
        result = run_passes(graph, options)
    graph = result.graph
    graph.info.custom_extensions += options.custom_extensions
    interface = interface_after_passes(graph, read)
    io = apply_remodel(options.remodel, graph, interface, options.verify_ir) if options.remodel is not None \
        else interface
    with timed(timings, "emission"):
        rendered = render(graph, model, io.names_of(read), options)
    with timed(timings, "weight_values"):
        nonfinite = nonfinite_weights(read.traced.state_read, options.target.bf16_as)
        report_nonfinite(nonfinite, strict=options.strict)
    artifact = make_artifact(read, graph, rendered, options, timings=timings, pass_stats=result.stats)
    if nonfinite:
        artifact.stats["nonfinite_weights"] = [str(f) for f in nonfinite]
    if options.remodel is not None or (io.input_names, io.output_names) != (list(read.input_names),
                                                                             list(read.output_names)):
        remodelled_artifact(artifact, io, remodel=options.remodel is not None)
    if check and options.check_io:
        artifact.check(options.tolerance)
    return artifact
