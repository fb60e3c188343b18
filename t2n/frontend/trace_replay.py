"""The traced graph run once on the example inputs and compared with what ``forward``
returned: what the trace left out.

``torch.jit.trace`` records the ops it sees on traced values. A write into a tensor's
memory that goes around torch's ops (through a NumPy view, or ``.data`` of a tensor the
trace does not follow) changes what PyTorch returns while the graph, and so the artifact,
computes something else, with no error. (``.data`` of an input or of a tensor ``forward``
made is traced as ``detach()`` by :mod:`t2n.frontend.trace_watch`, so diffusers'
CogVideoX, which fills its positional table that way, is traced whole.) Running the graph
in TorchScript's interpreter on the same inputs shows it. Each output that differs is
reported: a :class:`UntracedEffectWarning`, or with ``compile(..., strict=True)`` an
:class:`~t2n.errors.UntracedEffectError`.

The replay is skipped where it cannot be compared: calls taken by extractors (one node
each, not runnable), random draws, and writes to parameters or buffers that the
artifact does not start from.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import torch

from t2n.errors import UntracedEffectError
from t2n.frontend import torch_private
from t2n.frontend.sampling import SAMPLING_KINDS

log = logging.getLogger("t2n.frontend")


class UntracedEffectWarning(UserWarning):
    """The traced graph does not compute what ``forward`` returned on the example inputs,
    so neither does the artifact."""


@attrs.frozen
class ReplayDifference:
    """One output of the replayed graph that is not what ``forward`` returned."""

    output: str
    max_abs: float
    differing: int
    total: int

    def describe(self) -> str:
        if self.differing < 0:
            return f"{self.output} has another shape or dtype"
        return f"{self.output} differs by up to {self.max_abs:.3g} ({self.differing} of {self.total} elements)"


def replay_differences(graph: torch._C.Graph, inputs: Sequence[torch.Tensor],
                       references: Sequence[torch.Tensor], names: Sequence[str]) -> list[ReplayDifference]:
    """The outputs of ``graph`` run on ``inputs`` that differ from ``references``; none
    when the graph cannot be replayed (it draws random numbers, ``rrelu`` or ``dropout``
    in training mode included, or the interpreter refuses it: the replay is a check,
    never a reason to fail)."""
    if any(_draws(n) for n in graph.nodes()):
        return []
    try:
        with torch.no_grad():
            result = torch_private.interpret_graph(graph.copy(), inputs)
    except Exception as exc:  # an interpreter limit is not the model's problem
        log.debug("the traced graph was not replayed: %s: %s", type(exc).__name__, exc)
        return []
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    if len(outputs) != len(references) or not all(isinstance(o, torch.Tensor) for o in outputs):
        return []
    labels = [f"output {i}" + (f" (`{p}`)" if p and p != str(i) else "") for i, p in enumerate(names)]
    found = [_difference(label, got, want) for label, got, want in zip(labels, outputs, references)]
    return [d for d in found if d is not None]


def _draws(node: torch._C.Node) -> bool:
    """Whether ``node`` draws random numbers in this call: a sampling op, or an op its
    schema calls nondeterministic whose ``train``/``dropout_p`` does not switch it off
    (TorchScript reads ``train``; attention's ``dropout_p`` of 0 is read here)."""
    if node.kind() in SAMPLING_KINDS:
        return True
    if not node.isNondeterministic():
        return False
    try:
        dropout = node.namedInput("dropout_p")
    except RuntimeError:
        return True
    value: Any = dropout.toIValue()
    return dropout.node().kind() != "prim::Constant" or value != 0.0


def _difference(name: str, got: torch.Tensor, want: torch.Tensor) -> ReplayDifference | None:
    """How ``got`` differs from ``want``: beyond rounding for floats (the interpreter runs
    the same kernels, so a real difference is far larger), at all for other dtypes."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return ReplayDifference(name, float("nan"), -1, want.numel())
    if want.numel() == 0:
        return None
    if want.is_complex():
        got, want = torch.view_as_real(got), torch.view_as_real(want)
    if want.is_floating_point():
        scale = float(want.abs().nan_to_num(0.0, 0.0, 0.0).max())
        same = torch.isclose(got, want, rtol=1e-4, atol=1e-5 * max(1.0, scale), equal_nan=True)
        gap = (got.double() - want.double()).abs().nan_to_num(float("inf"), float("inf"), float("inf"))
    else:
        same = got == want
        gap = (got.double() - want.double()).abs()
    differing = int((~same).sum())
    if not differing:
        return None
    return ReplayDifference(name, float(gap[~same].max()), differing, want.numel())


def replay_inputs(examples: Sequence[torch.Tensor], state: Sequence[tuple[str, torch.Tensor]],
                  start: Mapping[str, torch.Tensor]) -> list[torch.Tensor]:
    """The graph's inputs as the traced call saw them: copies of the examples (the graph
    may write into them), then each parameter or buffer, at its value before the call
    where the call wrote it."""
    return [*(t.clone() for t in examples), *(start[name].clone() if name in start else t for name, t in state)]


ADVICE = (
    "Something forward did is not in the trace, so the artifact would compute the traced "
    "graph, not what PyTorch returned. The usual cause is a write that goes around torch's ops "
    "(through a NumPy view of a tensor, or its storage): write it with ops the trace records "
    "(`t[:, a:b] = v`, or torch.cat), or try frontend=\"export\" (torch.export records such writes "
    "where it can run them). "
    "compile(..., strict=True) makes this an error."
)


def report(differences: Sequence[ReplayDifference], *, strict: bool) -> None:
    """Warn once listing every differing output, or raise."""
    if not differences:
        return
    lines = [d.describe() for d in differences]
    listing = "\n".join(f"  - {line}" for line in lines)
    message = (f"the traced graph, run on the example inputs, does not compute what forward "
               f"returned:\n{listing}\n{ADVICE}")
    if strict:
        raise UntracedEffectError(message + " Nothing was written.")
    warnings.warn(message, UntracedEffectWarning, stacklevel=2)


__all__ = ["ADVICE", "ReplayDifference", "UntracedEffectWarning", "replay_differences", "replay_inputs", "report"]
