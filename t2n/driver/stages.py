"""The middle and end of ``t2n.compile``: lowering to the IR, the pass pipeline and the
target's rendering, each timed into ``artifact.stats["timings"]``, and the artifact
they make."""

from __future__ import annotations

import contextlib
import functools
import gc
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import attrs
import numpy as np
import torch

from t2n.artifact import Artifact
from t2n.backends.nnef.renderer import RenderedModel
from t2n.backends.nnef.versions import native_ops
from t2n.backends.target import Target
from t2n.backends.tract.passes import tract_form_passes
from t2n.check.bundle import IRRecorder, recording
from t2n.driver.early_write import parameter_paths
from t2n.driver.reading import ReadModel
from t2n.frontend.export.lower import lower_program
from t2n.frontend.export.shapes import lowering_shapes
from t2n.frontend.io_match import pass_through
from t2n.frontend.lower import lower
from t2n.frontend.registry import LoweringRegistry
from t2n.frontend.weight_guard import guarded_tensors
from t2n.ir import Graph, OpSet, print_graph
from t2n.options import confirm_rendered_names
from t2n.passes.base import Pass, PassResult
from t2n.passes.pipeline import builtin_passes, compile_pipeline
from t2n.passes.precision import forced_pass_names
from t2n.passes.spec import PipelineSpec
from t2n.serialize.overlap import ordered_like
from t2n.version import __version__

_P = ParamSpec("_P")
_R = TypeVar("_R")


def gc_paused(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run ``fn`` with Python's cyclic garbage collector paused (then as it was).

    Compiling an LLM makes tens of thousands of small objects and frees almost none, so
    the collector's passes over them (and over the model's own objects) find nothing and
    cost up to half of the lowering time (0.56 s → 0.29 s for the 16-layer Llama).
    """

    @functools.wraps(fn)
    def paused(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return paused


@contextlib.contextmanager
def timed(timings: dict[str, float], stage: str) -> Iterator[None]:
    """Record how long the ``with`` block took as ``timings[stage]`` (when it succeeds)."""
    t0 = time.perf_counter()
    yield
    timings[stage] = time.perf_counter() - t0


def lower_model(read: ReadModel, registry: LoweringRegistry | None, target: Target, *,
                op_set: OpSet | None, naming_scheme: str, strict_dynamic_axes: bool) -> Graph:
    """The IR graph of the read model, named and labelled as the artifact will be."""
    registry = registry or LoweringRegistry.default()
    ins, outs = read.input_names, read.output_names
    if read.frontend == "export":
        graph = lower_program(read.traced, registry, ins, outs, op_set=op_set, native_ops=native_ops(target),
                              **lowering_shapes(read.traced, ins, read.request, strict=strict_dynamic_axes))
    else:
        graph = lower(read.traced, registry, ins, outs, static_sizes=not read.axes,
                      op_set=op_set, native_ops=native_ops(target))
    graph.info.input_names, graph.info.output_names = tuple(ins), tuple(outs)
    graph.info.naming_scheme = naming_scheme
    pass_through(graph, read.same, ins, outs)
    graph.info.specializations = read.specialized
    graph.info.properties = {"t2n_version": __version__, "torch_version": torch.__version__.split("+")[0]}
    return graph


def run_passes(graph: Graph, read: ReadModel, target: Target, passes: PipelineSpec,
               pass_registry: Mapping[str, Pass] | None, *, fold_batch_norm: bool, strict_dynamic_axes: bool,
               verify_ir: bool, dump: Callable[[str, Graph], None] | None) -> PassResult:
    """The built-in passes, the target's and the user's (``passes``), as ``compile`` runs
    them; ``dump`` sees the lowered graph first, then the graph after every change."""
    if dump is not None:
        dump("000-lowered", graph)
    builtins = builtin_passes(bf16_as=target.bf16_as, dynamic_axes=read.axes if read.request is None else {},
                              strict_dynamic_axes=strict_dynamic_axes, verify_each=verify_ir, dump=dump)
    return compile_pipeline(passes, registry=pass_registry, builtins=builtins, fold_batch_norm=fold_batch_norm,
                            verify_each=verify_ir, dump=dump, force_f32=forced_pass_names(target),
                            target_passes=tract_form_passes(target))(graph)


def ir_dumper(folder: str | Path | None, recorder: IRRecorder | None) -> Callable[[str, Graph], None] | None:
    """The pipeline's ``dump`` hook: each stage's IR text into ``folder`` (``dump_ir``) and
    into ``recorder`` (for a debug bundle); ``None`` when neither is asked."""
    if folder is None:
        return recording(None, recorder)
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)

    def dump(label: str, graph: Graph) -> None:
        (root / f"{label}.ir").write_text(print_graph(graph, with_locs=True))

    return recording(dump, recorder)


def render(target: Target, graph: Graph, model: Any, traced: Any,
           ins: Sequence[str], outs: Sequence[str]) -> RenderedModel:
    """NNEF text and tensor list for ``target``; tensors in parameter order (so that
    ``export`` can write them early) and guarded against weights changed after compile."""
    rendered = target.renderer().render(graph)
    confirm_rendered_names(rendered.input_ids, rendered.output_ids, ins, outs)
    if isinstance(model, torch.nn.Module):
        rendered = attrs.evolve(rendered, tensors=tuple(ordered_like(rendered.tensors, parameter_paths(model))))
    return attrs.evolve(rendered, tensors=tuple(guarded_tensors(rendered.tensors, traced.state_read)))


def make_artifact(read: ReadModel, graph: Graph, target: Target, rendered: RenderedModel, *,
                  debug_bundle_path: Path | None, recorder: IRRecorder | None,
                  timings: dict[str, float], pass_stats: Mapping[str, Any]) -> Artifact:
    """The compiled artifact, with PyTorch's example inputs and reference outputs kept
    (as numpy) for ``Artifact.check``."""
    return Artifact(
        ir=graph,
        target=target,
        rendered=rendered,
        input_names=read.input_names,
        output_names=read.output_names,
        example_inputs=[to_numpy(t, target.bf16_as.numpy) for t in read.traced.example_inputs],
        reference_outputs=[to_numpy(t) for t in read.traced.reference_outputs],
        debug_bundle_path=debug_bundle_path,
        ir_stages=recorder.stages if recorder is not None else [],
        stats={"timings": timings, "pass_stats": dict(pass_stats)},
    )


def to_numpy(t: torch.Tensor, bf16_as: np.dtype | None = None) -> np.ndarray:
    """A tensor's values as numpy (bfloat16, which numpy lacks, as ``bf16_as`` or f32)."""
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.float().numpy() if bf16_as is None else t.float().numpy().astype(bf16_as)
    return t.numpy()
