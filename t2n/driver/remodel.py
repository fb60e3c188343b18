"""``compile(..., remodel=plan)`` in the driver: the example inputs sized by the plan's
``eval_symbols`` before the trace (its checks and dynamic axes are made with the
options, :mod:`t2n.remodel.export`), and the boundary passes after the pipeline
(:mod:`t2n.remodel.apply`), with the example inputs and PyTorch's outputs reshaped to
the new interface so that ``check`` compares like with like: bound inputs leave the
example inputs (their value must be the size they are bound to), collapsed axes are
squeezed out of the example inputs and reference outputs, and only the kept outputs
remain, in the plan's order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import torch

from t2n.artifact import Artifact
from t2n.driver.stages import to_numpy
from t2n.errors import RemodelPlanError, T2NError
from t2n.frontend.base import ReadModel
from t2n.ir import Graph
from t2n.passes.base import PassResult
from t2n.passes.manager import PassManager
from t2n.passes.remodel import BindScalarToDimSize, CollapseInputDims, CollapseOutputDims
from t2n.passes.remodel.common import norm_axes
from t2n.remodel.apply import plan_passes
from t2n.remodel.export import RemodelStep


def resized_args(step: RemodelStep | None, args: Any, input_names: Sequence[str] | None,
                 axes: Mapping[str, Mapping[int, str]]) -> Any:
    """``args`` with each axis an ``eval_symbols`` symbol names cut or zero-padded to its size."""
    if step is None or not step.sizes:
        return args
    original = step.original
    pos = [args] if isinstance(args, torch.Tensor) else list(args)
    names = list(input_names) if input_names is not None else [f"input_{i}" for i in range(len(pos))]
    for name, ip in original.inputs.items():
        if not ip.eval_symbols:
            continue
        key = original.key("inputs", name, "eval_symbols")
        if name not in names or not isinstance(pos[names.index(name)], torch.Tensor):
            raise RemodelPlanError(key, f"no positional tensor argument is named {name!r} (name them with "
                                        "input_names=...)")
        i = names.index(name)
        shape = ip.original_shape or ()
        t = pos[i]
        for sym, size in ip.eval_symbols.items():
            found = [a for a, d in enumerate(shape) if d == sym] or \
                [a for a, s in axes.get(name, {}).items() if s == sym]
            if len(found) != 1:
                raise RemodelPlanError(f"{key}.{sym}", f"say which axis of {name!r} is {sym} "
                                                       "(in original_shape or dynamic_axes)")
            t = _resize(t, found[0], size)
        pos[i] = t
    return pos[0] if isinstance(args, torch.Tensor) else type(args)(pos) if isinstance(args, tuple) else pos


def _resize(t: torch.Tensor, axis: int, size: int) -> torch.Tensor:
    have = t.shape[axis]
    if size <= have:
        return t.narrow(axis, 0, size)
    pad = list(t.shape)
    pad[axis] = size - have
    return torch.cat([t, t.new_zeros(pad)], dim=axis)


@attrs.frozen
class RemodelledIO:
    input_names: list[str]
    output_names: list[str]
    example_inputs: list[torch.Tensor]
    reference_outputs: list[torch.Tensor]
    result: PassResult

    def names_of(self, read: ReadModel) -> ReadModel:
        """``read`` with the remodelled interface's names (those graph.nnef gives it)."""
        return attrs.evolve(read, input_names=self.input_names, output_names=self.output_names)


def interface_after_passes(graph: Graph, read: ReadModel) -> RemodelledIO:
    """The interface the pipeline left (an interface pass, such as a stateful cache, may
    have removed inputs and outputs): its names, the example inputs of those left, and
    PyTorch's outputs of those left while no input was removed (else they are not what
    the graph computes on the inputs left: none are kept)."""
    ins = list(graph.info.input_names or read.input_names)
    outs = list(graph.info.output_names or read.output_names)
    added = [n for n in ins if n not in read.input_names] + [n for n in outs if n not in read.output_names]
    if added:
        raise T2NError(f"internal error: the passes gave the graph interface names the model has not: {added}; "
                       "an interface pass may remove inputs and outputs, not add them")
    by_in = dict(zip(read.input_names, read.traced.example_inputs))
    by_out = dict(zip(read.output_names, read.traced.reference_outputs))
    kept = len(ins) == len(read.input_names)
    return RemodelledIO(ins, outs, [by_in[n] for n in ins],
                        [by_out[n] for n in outs if n in by_out] if kept else [], PassResult(graph, False))


def apply_remodel(step: RemodelStep, graph: Graph, before: RemodelledIO, verify_each: bool) -> RemodelledIO:
    """Carry the plan out on the compiled graph (whose interface is ``before``); the example
    inputs and outputs to match."""
    passes = plan_passes(graph, step.plan)
    by_in = dict(zip(before.input_names, before.example_inputs))
    by_out = dict(zip(before.output_names, before.reference_outputs))
    for p in passes:
        if isinstance(p, BindScalarToDimSize):
            _check_bound(p, by_in)
        elif isinstance(p, CollapseInputDims) and p.input in by_in:
            t = by_in[p.input]
            by_in[p.input] = t.squeeze(tuple(norm_axes(p.axes, t.dim(), p.key)))
        elif isinstance(p, CollapseOutputDims) and p.output in by_out:
            t = by_out[p.output]
            by_out[p.output] = t.squeeze(tuple(norm_axes(p.axes, t.dim(), p.key)))
    result = PassManager(passes, verify_each=verify_each, label="remodel")(graph)
    in_names = list(graph.info.input_names or ())
    out_names = list(graph.info.output_names or ())
    return RemodelledIO(in_names, out_names, [by_in[n] for n in in_names],
                        [by_out[n] for n in out_names if n in by_out], result)


def _check_bound(p: BindScalarToDimSize, by_in: Mapping[str, torch.Tensor]) -> None:
    """The example value of a bound input is the size it is bound to (else PyTorch's
    outputs would not be those of the remodelled model)."""
    value, source = by_in.get(p.input), by_in.get(p.source)
    if value is None or source is None or value.numel() != 1:
        return
    size = source.shape[p.axis]
    if float(value.reshape(-1)[0]) != float(size):
        raise RemodelPlanError(p.key, f"the example input {p.input!r} is {value.reshape(-1)[0].item()} but axis "
                                      f"{p.axis} of {p.source!r} is {size}: give example inputs that agree")


def remodelled_artifact(artifact: Artifact, io: RemodelledIO, *, remodel: bool = True) -> None:
    """The artifact's names, example inputs and reference outputs made those of ``io``'s
    interface (the plan's, or the one interface passes left); what each boundary pass of
    a plan did is in ``artifact.stats["remodel"]``."""
    bf16 = artifact.target.bf16_as.numpy
    artifact.input_names = list(io.input_names)
    artifact.output_names = list(io.output_names)
    artifact.example_inputs = [to_numpy(t, bf16) for t in io.example_inputs]
    artifact.reference_outputs = [to_numpy(t) for t in io.reference_outputs]
    if remodel:
        artifact.stats["remodel"] = dict(io.result.stats)
