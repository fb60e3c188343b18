"""The middle and end of ``t2n.compile``: lowering to the IR, the pass pipeline and the
target's rendering, each timed into ``artifact.stats["timings"]``, and the artifact
they make."""

from __future__ import annotations

import contextlib
import functools
import gc
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

import attrs
import numpy as np
import torch

from t2n.artifact import Artifact
from t2n.backends.nnef.renderer import RenderedModel
from t2n.driver.early_write import parameter_paths
from t2n.errors import InvalidArgumentError, T2NError
from t2n.frontend.base import ReadModel
from t2n.frontend.io_match import pass_through
from t2n.frontend.weight_guard import guarded_tensors
from t2n.ir import DType, Graph
from t2n.options import CompileOptions
from t2n.passes.base import PassResult
from t2n.serialize.finite import NonFinite, nonfinite_tensors
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


def lower_model(read: ReadModel, options: CompileOptions) -> Graph:
    """The IR graph of the read model, named and labelled as the artifact will be."""
    graph = options.frontend.lower(read, options)
    ins, outs = read.input_names, read.output_names
    graph.info.input_names, graph.info.output_names = tuple(ins), tuple(outs)
    graph.info.naming_scheme = options.naming_scheme
    pass_through(graph, read.same, ins, outs)
    graph.info.specializations = read.specialized
    graph.info.properties = {"t2n_version": __version__, "torch_version": torch.__version__.split("+")[0]}
    return graph


def run_passes(graph: Graph, options: CompileOptions) -> PassResult:
    """The compile's pipeline (built once with its options: the built-in passes, the
    user's and the target's); ``options.dump`` sees the lowered graph first, then the
    graph after every change."""
    if options.dump is not None:
        options.dump("000-lowered", graph)
    return options.pipeline(graph)


def render(graph: Graph, model: Any, read: ReadModel, options: CompileOptions) -> RenderedModel:
    """NNEF text and tensor list for the target; tensors in parameter order (so that
    ``export`` can write them early) and guarded against weights changed after compile."""
    rendered = options.target.renderer().render(graph)
    confirm_rendered_names(rendered.input_ids, rendered.output_ids, read.input_names, read.output_names)
    if isinstance(model, torch.nn.Module):
        rendered = attrs.evolve(rendered, tensors=tuple(ordered_like(rendered.tensors, parameter_paths(model))))
    return attrs.evolve(rendered, tensors=tuple(guarded_tensors(rendered.tensors, read.traced.state_read)))


def confirm_rendered_names(input_ids: Sequence[str], output_ids: Sequence[str],
                           input_names: Sequence[str], output_names: Sequence[str]) -> None:
    """The last guard of the naming rule: graph.nnef names its inputs and outputs exactly
    as the artifact reports them (a difference is a t2n bug, never silently shipped)."""
    if list(input_ids) != list(input_names) or list(output_ids) != list(output_names):
        raise T2NError(
            f"internal error: graph.nnef names the inputs {list(input_ids)} and outputs "
            f"{list(output_ids)}, but the artifact would report {list(input_names)} and "
            f"{list(output_names)}; please report this with the model"
        )


def make_artifact(read: ReadModel, graph: Graph, rendered: RenderedModel, options: CompileOptions, *,
                  timings: dict[str, float], pass_stats: Mapping[str, Any]) -> Artifact:
    """The compiled artifact, with PyTorch's example inputs and reference outputs kept
    (as numpy) for ``Artifact.check``."""
    target = options.target
    return Artifact(
        ir=graph,
        target=target,
        rendered=rendered,
        input_names=read.input_names,
        output_names=read.output_names,
        example_inputs=[to_numpy(t, target.bf16_as.numpy) for t in read.traced.example_inputs],
        reference_outputs=[to_numpy(t) for t in read.traced.reference_outputs],
        debug_bundle_path=options.debug_bundle_path,
        ir_stages=options.ir_record.stages if options.ir_record is not None else [],
        stats={"timings": timings, "pass_stats": dict(pass_stats),
               "state_written": list(getattr(read.traced, "state_written", ())),
               **({"noise_inputs": [d.describe() for d in read.traced.noise]} if read.traced.noise else {})},
    )


def nonfinite_weights(state: Mapping[str, torch.Tensor], bf16_as: DType) -> list[NonFinite]:
    """The model's parameters and buffers the graph holds that are NaN, infinite (for
    buffers, only NaN: an infinite buffer may be a mask) or beyond the range of the dtype
    they are written in (bf16 written as ``bf16_as``)."""
    from t2n.torch_data import tensor_data

    items = []
    params = set()
    for name, t in state.items():
        if not t.is_floating_point() or t.is_meta or t.device.type != "cpu" or t.layout != torch.strided:
            continue
        try:
            data = tensor_data(t)
        except (InvalidArgumentError, RuntimeError):  # a dtype with no NNEF form: not written as is
            continue
        items.append((name, data, bf16_as if data.dtype is DType.BF16 else data.dtype))
        if isinstance(t, torch.nn.Parameter):
            params.add(name)
    return nonfinite_tensors(items, infinities=params.__contains__)


def to_numpy(t: torch.Tensor, bf16_as: np.dtype | None = None) -> np.ndarray:
    """A tensor's values as numpy (bfloat16, which numpy lacks, as ``bf16_as`` or f32); a
    lazily negated or conjugated view (``z.imag`` of an inverse transform) is computed."""
    t = t.detach().cpu().resolve_neg().resolve_conj()
    if t.dtype == torch.bfloat16:
        return t.float().numpy() if bf16_as is None else t.float().numpy().astype(bf16_as)
    return t.numpy()
