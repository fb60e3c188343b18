"""Module extractors: instances of a class exported by the user's rule, forward not traced."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import t2n
from t2n.errors import ExtractorError, InvalidArgumentError, UnsupportedOpsError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import module_extractor as example


def test_example_runs_in_tract():
    assert example.main().ok


class Scaled(torch.nn.Module):
    """Two inputs (one a keyword float), a tuple out, and Python control flow on data."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("bias", torch.arange(3.0))

    def forward(self, x, y, *, k=1.0):
        if x.sum() > -1e9:  # data-dependent: a trace would specialise here
            return x * k + self.bias, y - 1
        return x, y  # pragma: no cover


def lower_scaled(ctx, module, x, y, *, k=1.0):
    out = ctx.b.op("add", ctx.b.op("mul", x, ctx.as_value(float(k))), ctx.parameter("bias"))
    return out, ctx.b.op("sub", y, ctx.as_value(1.0))


class Outer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.ModuleList([Scaled(), Scaled()])

    def forward(self, x, y):
        a, b = self.inner[0](x, y, k=2.5)
        c, d = self.inner[1](a.relu(), b)
        return c + d


def _compile(model, rule=lower_scaled, **kw):
    return t2n.compile(model, (torch.randn(2, 3), torch.randn(2, 3)),
                       extractors=[t2n.ModuleExtractor(Scaled, lower=rule)], **kw)


def test_instances_exported_by_the_rule_with_their_buffers_named():
    model = Outer()
    art = _compile(model, strict=True)  # the data-dependent `if` inside is not traced
    labels = {op.attrs.get("label") for op in art.ir.ops() if op.kind == "variable"}
    assert {"inner.0.bias", "inner.1.bias"} <= labels
    assert art.check().ok
    assert all("forward" not in vars(m) for m in model.modules())  # instances restored


def test_same_model_without_extractors_is_traced():
    with pytest.warns(t2n.SpecializedTraceWarning):
        t2n.compile(Outer(), (torch.randn(2, 3), torch.randn(2, 3)))


@pytest.mark.parametrize("bad, says", [
    (t2n.ModuleExtractor(Scaled, lower=lower_scaled), "list of t2n.ModuleExtractor"),
    ([lower_scaled], "extractors[0] must be a t2n.ModuleExtractor"),
    ([t2n.ModuleExtractor(Scaled, lower=lower_scaled)] * 2, "Scaled has two extractors"),
])
def test_bad_extractor_lists_refused_before_tracing(bad, says):
    model = Outer()
    with pytest.raises(InvalidArgumentError, match=r"extractors") as info:
        t2n.compile(model, (torch.randn(2, 3), torch.randn(2, 3)), extractors=bad)
    assert says in str(info.value)


def test_bad_extractor_objects_refused():
    with pytest.raises(InvalidArgumentError, match="nn.Module class"):
        t2n.ModuleExtractor(Scaled(), lower=lower_scaled)
    with pytest.raises(InvalidArgumentError, match="lower must be a function"):
        t2n.ModuleExtractor(Scaled, lower="lower_scaled")


def test_extractors_refused_for_script_modules():
    scripted = torch.jit.script(torch.nn.Linear(3, 3))
    with pytest.raises(InvalidArgumentError, match="ScriptModules"):
        t2n.compile(scripted, (torch.randn(2, 3),),
                    extractors=[t2n.ModuleExtractor(Scaled, lower=lower_scaled)])


def _returns_one(ctx, module, x, y, *, k=1.0):
    return x


def _wrong_shape(ctx, module, x, y, *, k=1.0):
    return ctx.b.op("concat", x, x, axis=0), y


def _raises(ctx, module, x, y, *, k=1.0):
    raise ValueError("boom in my rule")


def _unknown_param(ctx, module, x, y, *, k=1.0):
    return ctx.parameter("weight"), y


def _unsupported(ctx, module, x, y, *, k=1.0):
    raise ctx.unsupported("this k is not exportable")


@pytest.mark.parametrize("rule, error, says", [
    (_returns_one, ExtractorError, "returned 1 item(s) (Value); its forward returned 2 tensor(s)"),
    (_wrong_shape, ExtractorError, "output 0 is f32[4, 3]"),
    (_raises, ExtractorError, "failed"),
    (_unknown_param, ExtractorError, "no parameter or buffer 'weight' (it has: bias)"),
    (_unsupported, UnsupportedOpsError, "this k is not exportable"),
])
def test_rule_mistakes_name_the_class_and_module_path(rule, error, says):
    model = Outer()
    with pytest.raises(error) as info:
        _compile(model, rule)
    text = str(info.value)
    assert says in text and "inner.0" in text
    if error is ExtractorError:
        assert "Scaled" in text
    assert all("forward" not in vars(m) for m in model.modules())
    if rule is _raises:
        assert isinstance(info.value.__cause__, ValueError)


class NoTensorOut(torch.nn.Module):
    def forward(self, x):
        return x.shape[0]


def test_module_returning_no_tensor_refused():
    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.n = NoTensorOut()

        def forward(self, x):
            return x * self.n(x)

    with pytest.raises(ExtractorError, match=r"NoTensorOut at n: its forward returned no tensor"):
        t2n.compile(M(), (torch.randn(2, 3),), extractors=[t2n.ModuleExtractor(NoTensorOut, lower=_returns_one)])


def test_the_model_itself_can_be_extracted():
    model = Scaled()
    with pytest.raises(ExtractorError, match=r"Scaled at the model root: output 0"):
        t2n.compile(model, (torch.randn(2, 3), torch.randn(2, 3)),
                    extractors=[t2n.ModuleExtractor(Scaled, lower=_wrong_shape)])
    art = t2n.compile(model, (torch.randn(2, 3), torch.randn(2, 3)),
                      extractors=[t2n.ModuleExtractor(Scaled, lower=lower_scaled)])
    assert [op.attrs.get("label") for op in art.ir.ops() if op.kind == "variable"] == ["bias"]
    assert art.check().ok


def test_extracted_blocks_follow_a_dynamic_axis():
    torch.manual_seed(1)
    model = example.Model()
    art = t2n.compile(model, (torch.randn(4, 8),), dynamic_axes={"input_0": {0: "B"}},
                      extractors=[t2n.ModuleExtractor(example.GatedBlock, lower=example.lower_gated_block)])
    x = torch.randn(7, 8)
    with torch.no_grad():
        expected = model(x)
    assert art.check(inputs=[x.numpy()], expected=[expected.numpy()]).ok


def test_another_thread_calling_an_extracted_instance_runs_it_normally():
    import threading

    block = example.GatedBlock(8)
    model = torch.nn.Sequential(block, torch.nn.Tanh())
    arrived, release = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    class Wait(torch.nn.Module):
        def forward(self, x):
            arrived.set()
            assert release.wait(20)
            return x

    def other() -> None:
        assert arrived.wait(20)
        x = torch.randn(2, 8, requires_grad=True)
        block(x).sum().backward()  # the extracted instance itself, with autograd
        seen["grad"] = x.grad
        release.set()

    worker = threading.Thread(target=other)
    worker.start()
    try:
        art = t2n.compile(torch.nn.Sequential(model, Wait()), (torch.randn(3, 8),),
                          extractors=[t2n.ModuleExtractor(example.GatedBlock, lower=example.lower_gated_block)])
    finally:
        release.set()
        worker.join(30)
    assert torch.equal(seen["grad"], torch.ones(2, 8))  # its own forward ran, not the extractor's
    assert art.check().ok
