"""Helpers for testing exports in the real engines (used by t2n's own tests; handy
for users' op rules and passes too)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import torch

from t2n.api import compile
from t2n.artifact import Artifact
from t2n.backends.khronos.target import KhronosNNEF
from t2n.backends.target import Target
from t2n.backends.tract.target import TractNNEF
from t2n.check.compare import CheckReport, Tolerance
from t2n.errors import NotExpressibleError

TARGETS: dict[str, Target] = {"tract": TractNNEF(), "khronos": KhronosNNEF()}


class Evidence:
    """Which aten ops each target ran correctly, or refused, during a test run; the
    operator coverage table (``python -m tools.operator_table``) is built from it."""

    def __init__(self) -> None:
        self.ops: dict[str, dict[str, dict[str, Any]]] = {}

    def _entry(self, op: str, target: str) -> dict[str, Any]:
        return self.ops.setdefault(op, {}).setdefault(target, {"ok": 0, "refused": {}})

    def passed(self, target: str, ops: Mapping[str, int]) -> None:
        for op in ops:
            self._entry(op, target)["ok"] += 1

    def refused(self, target: str, problems: Sequence[Any]) -> None:
        for p in problems:
            reasons = self._entry(p.op, target)["refused"]
            reasons[p.reason] = reasons.get(p.reason, 0) + 1

    def to_json(self) -> dict[str, Any]:
        return {op: {t: {"ok": e["ok"], "refused": dict(sorted(e["refused"].items()))}
                     for t, e in sorted(ts.items())} for op, ts in sorted(self.ops.items())}


EVIDENCE: Evidence | None = None
"""Set by the test suite's ``--t2n-evidence`` option to record what each export proved."""

FRONTENDS = ("jit", "export")


@attrs.define
class HelperRun:
    """What the helpers did during one test: the frontend they compile with when the
    call names none, how many compiles they ran with it, and each target's result
    (``"ok"``: ran in its engine and matched PyTorch; ``"refused"``: refused as expected).
    The test suite runs each case once per frontend and builds the parity table
    (``python -m tools.parity_table``) from these."""

    frontend: str = "jit"
    compiles: int = 0
    targets: dict[str, str] = attrs.field(factory=dict)


RUN = HelperRun()
"""The current test's record; the test suite replaces it before every test."""


def _compile(model: Any, args: Any, target: Target, options: dict[str, Any]) -> Artifact:
    """``compile`` with the helpers' default frontend unless the call names one."""
    if "frontend" not in options and RUN.frontend != "jit":
        options = {**options, "frontend": RUN.frontend}
    RUN.compiles += 1
    return compile(model, args, target, verify_ir=True, **options)


def _record_pass(target: str, art: Artifact) -> None:
    RUN.targets[target] = "ok"
    if EVIDENCE is not None:
        EVIDENCE.passed(target, art.ir.info.aten_ops)


@attrs.frozen
class ExportResult:
    artifacts: dict[str, Artifact]
    reports: dict[str, CheckReport]
    refused: dict[str, NotExpressibleError]


def check_export(
    model: torch.nn.Module,
    args: Any,
    *,
    targets: Sequence[str | Target] = ("tract", "khronos"),
    khronos_refuses: bool | str = False,
    tolerance: Tolerance | str = Tolerance.APPROXIMATE,
    kwargs: Mapping[str, Any] | None = None,
    **options: Any,
) -> ExportResult:
    """Export to each target, run it in that target's engine and compare with PyTorch.

    ``khronos_refuses=True`` (or an op name that must appear in the error) asserts
    that the Khronos export is refused with :class:`NotExpressibleError` instead.
    The IR is verified after every pass. The model is read by ``RUN.frontend`` (the
    test suite sets it per test) unless ``frontend=`` is given.
    """
    if isinstance(model, torch.nn.Module):
        model = model.eval()
    artifacts: dict[str, Artifact] = {}
    reports: dict[str, CheckReport] = {}
    refused: dict[str, NotExpressibleError] = {}
    for t in targets:
        target = TARGETS[t] if isinstance(t, str) else t
        key = t if isinstance(t, str) else target.name
        if isinstance(target, KhronosNNEF) and khronos_refuses:
            try:
                _compile(model, args, target, {"kwargs": kwargs, **options})
            except NotExpressibleError as exc:
                if isinstance(khronos_refuses, str):
                    assert khronos_refuses in str(exc), f"{khronos_refuses!r} not named in: {exc}"
                refused[key] = exc
                RUN.targets[key] = "refused"
                if EVIDENCE is not None:
                    EVIDENCE.refused(key, exc.problems)
                continue
            raise AssertionError("the Khronos export was expected to be refused, but it succeeded")
        art = _compile(model, args, target, {"kwargs": kwargs, **options})
        artifacts[key] = art
        reports[key] = art.check(tolerance)
        _record_pass(key, art)
    return ExportResult(artifacts, reports, refused)


class Lambda(torch.nn.Module):
    """A module whose forward is ``fn``: exports a plain function of tensors
    (``check_export(Lambda(lambda x: x.cumsum(-1)), (x,))``)."""

    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs: Any) -> Any:
        return self.fn(*xs)


class Call(torch.nn.Module):
    """A module whose forward is ``fn(module, *inputs)``: exports one way of calling a
    layer (``Call(nn.MultiheadAttention(8, 2), lambda m, q, k: m(q, k, k)[0])``)."""

    def __init__(self, module: torch.nn.Module, fn: Any) -> None:
        super().__init__()
        self.m = module
        self.fn = fn

    def forward(self, *xs: Any) -> Any:
        return self.fn(self.m, *xs)


def check_fn(fn: Any, *args: Any, **options: Any) -> ExportResult:
    """``check_export`` of a plain function of tensors called on ``args``."""
    return check_export(Lambda(fn).eval(), args, **options)


__all__ = ["Call", "ExportResult", "Lambda", "TractNNEF", "check_dynamic", "check_export", "check_fn"]


def check_dynamic(
    model: torch.nn.Module,
    make_args: Any,
    dynamic_axes: Mapping[str, Mapping[int, str]],
    sizes: Sequence[Mapping[str, int]],
    *,
    trace_at: Mapping[str, int] | None = None,
    tolerance: Tolerance | str = Tolerance.APPROXIMATE,
    **options: Any,
) -> Artifact:
    """Export once with ``dynamic_axes``, then at every ``sizes`` entry (symbol → value)
    run PyTorch and tract on ``make_args(**size)``, both feeding inputs of that size to
    the symbolic model and after fixing the symbols, and compare.

    ``make_args(**size)`` returns the positional args tuple for one size; the model is
    traced at ``trace_at`` (default: the first size).
    """
    from t2n.frontend.io import flatten

    model = model.eval()
    first = dict(trace_at or sizes[0])
    art = _compile(model, make_args(**first), TractNNEF(), {"dynamic_axes": dynamic_axes, **options})
    for size in sizes:
        args = make_args(**size)
        with torch.no_grad():
            out = model(*args)
        ins, _, _ = flatten((args, {}))
        refs, _, _ = flatten(out)
        np_ins = [t.detach().numpy() for t in ins]
        np_refs = [t.detach().float().numpy() if t.dtype == torch.bfloat16 else t.detach().numpy() for t in refs]
        art.check(tolerance, inputs=np_ins, expected=np_refs)
        art.check(tolerance, inputs=np_ins, expected=np_refs, symbols=dict(size))
    _record_pass("tract", art)
    return art
