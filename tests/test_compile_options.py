"""One options object per compile: made and checked once at the entry point, the pass
pipeline built once inside it, the frontend a strategy object, and the target asked
through its own methods (never by name)."""

from __future__ import annotations

import inspect

import attrs
import pytest
import torch
from torch import nn

import t2n
from t2n import api, options
from t2n.errors import InvalidArgumentError
from t2n.frontend.jit.frontend import JitFrontend
from t2n.ir import Graph
from t2n.passes import Pass, PassResult
from t2n.passes.dynamic_axes import DynamicAxes
from t2n.passes.manager import PassManager

X = torch.randn(2, 6)


def _stages(p: Pass) -> list[Pass]:
    return [s for q in p.passes for s in _stages(q)] if isinstance(p, PassManager) else [p]


def _declared(fn):
    """A function's keyword-only parameters: name → (default, annotation)."""
    return {n: (p.default, p.annotation) for n, p in inspect.signature(fn).parameters.items()
            if p.kind is p.KEYWORD_ONLY}


def test_the_compile_keywords_are_declared_once_and_compile_spells_out_the_same():
    keywords = {f.name: (f.default, f.type) for f in attrs.fields(options.CompileKeywords)}
    assert tuple(keywords) == options.COMPILE_KEYWORDS
    assert _declared(api.compile) == keywords
    shared = {n: d for n, d in _declared(api.export).items() if n in keywords}
    assert shared == {n: keywords[n] for n in shared} and len(shared) >= 5


def test_compile_passes_every_keyword_on(monkeypatch):
    seen = {}

    def record(target, **keywords):
        seen.update(keywords)
        raise RuntimeError("stop")

    monkeypatch.setattr(api, "compile_options", record)
    with pytest.raises(RuntimeError, match="stop"):
        t2n.compile(nn.Linear(6, 3), (X,), strict=True)
    assert list(seen) == list(options.COMPILE_KEYWORDS) and seen["strict"] is True


def test_compile_options_refuses_a_keyword_compile_does_not_take_by_name():
    with pytest.raises(InvalidArgumentError, match=r"compile_options\(\) got unknown option\(s\) 'strictly'"):
        options.compile_options(strictly=True)


def test_export_checks_its_options_once_and_builds_the_pipeline_once(tmp_path, monkeypatch):
    made = {"options": 0, "pipeline": 0}
    real_options, real_pipeline = options.compile_options, options.compile_pipeline

    def counted_options(*args, **kwargs):
        made["options"] += 1
        return real_options(*args, **kwargs)

    def counted_pipeline(*args, **kwargs):
        made["pipeline"] += 1
        return real_pipeline(*args, **kwargs)

    monkeypatch.setattr(options, "compile_options", counted_options)
    monkeypatch.setattr(options, "compile_pipeline", counted_pipeline)
    t2n.export(nn.Linear(6, 3).eval(), (X,), tmp_path / "m.nnef.tar")
    assert made == {"options": 1, "pipeline": 1}


def test_strict_dynamic_axes_travels_in_the_options_to_the_pass_that_uses_it():
    checked = options.compile_options(dynamic_axes={"input_0": {0: "B"}}, strict_dynamic_axes=True)
    (axes,) = [p for p in _stages(checked.pipeline) if isinstance(p, DynamicAxes)]
    assert axes.strict and dict(axes.axes) == {"input_0": {0: "B"}}


@attrs.frozen
class _Seen(Pass):
    """Changes nothing; records that it ran."""

    runs: list[str] = attrs.field(factory=list, eq=False)
    name = "seen"

    def run(self, graph: Graph) -> PassResult:
        self.runs.append(graph.name)
        return PassResult(graph, False)


class _CountingFrontend(JitFrontend):
    """The jit frontend, counting what compile asks of it."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def check_options(self, opts):
        self.calls.append("check_options")
        super().check_options(opts)

    def check_model(self, model):
        self.calls.append("check_model")
        super().check_model(model)

    def read(self, model, args, opts):
        self.calls.append("read")
        return super().read(model, args, opts)

    def lower(self, read, opts):
        self.calls.append("lower")
        return super().lower(read, opts)


def test_a_frontend_is_an_object_compile_asks_in_order():
    frontend = _CountingFrontend()
    art = t2n.compile(nn.Linear(6, 3).eval(), (X,), frontend=frontend)
    assert frontend.calls == ["check_options", "check_model", "read", "lower"]
    art.check()


@attrs.frozen
class _TractWithAPass(t2n.TractNNEF):
    """A target with a pass of its own (as tract has its reified forms)."""

    seen: _Seen = attrs.field(factory=_Seen, kw_only=True)

    def passes(self) -> list[Pass]:
        return [*super().passes(), self.seen]


def test_a_target_adds_its_own_passes_through_its_method():
    target = _TractWithAPass()
    checked = options.compile_options(target)
    names = [p.display_name for p in _stages(checked.pipeline)]
    assert names.index("seen") > names.index("fold-batch-norm")
    t2n.compile(nn.Linear(6, 3).eval(), (X,), target).check()
    assert target.seen.runs == ["main"]
