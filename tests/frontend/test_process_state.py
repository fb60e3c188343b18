"""Tracing changes nothing of torch for the rest of the process: other threads (another
compile, ordinary PyTorch code with custom autograd Functions) run as if no compile ran."""

from __future__ import annotations

import threading
import warnings

import pytest
import torch

import t2n
from t2n.errors import UnsupportedOpsError, UnsupportedTorchError
from t2n.frontend import torch_private

ORIGINAL_APPLY = torch.autograd.Function.__dict__["apply"]


class Triple(torch.autograd.Function):
    """Ordinary training code with a custom gradient (not the forward's own, 3): its
    backward must run as written while compiling."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 7 + x * 0


class PairOut(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        return x * k + 1, x.cos()

    @staticmethod
    def backward(ctx, g, h):  # pragma: no cover - inference only
        raise NotImplementedError


class Nested(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return PairOut.apply(x, 2.0)[0] * 5

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, g):  # pragma: no cover
        raise NotImplementedError


class Functions(torch.nn.Module):
    """Custom Functions: a tuple output, one nested in another, new and old style."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.seen_apply: list[object] = []

    def forward(self, x):
        self.seen_apply.append(torch.autograd.Function.__dict__["apply"])
        a, b = PairOut.apply(self.lin(x), 3.0)
        return a.sin() + b + Nested.apply(x)


def test_custom_functions_exported_through_their_forward_without_patching_apply():
    model = Functions()
    art = t2n.compile(model, (torch.randn(2, 4),))
    assert model.seen_apply == [ORIGINAL_APPLY]  # apply was torch's own during the trace
    assert torch.jit._trace._trace_module_map is None  # the tracer's global module map untouched
    kinds = [op.kind for op in art.ir.ops()]
    assert "cos" in kinds and "sin" in kinds
    assert art.check().ok


class Gate(torch.nn.Module):
    """Holds its forward until ``release`` is set, so another thread runs meanwhile."""

    def __init__(self, arrived: threading.Event, release: threading.Event, scale: float) -> None:
        super().__init__()
        self.arrived, self.release, self.scale = arrived, release, scale
        self.conv = torch.nn.Conv1d(2, 2, 3)

    def forward(self, x):
        self.arrived.set()
        assert self.release.wait(20)
        return torch.relu(self.conv(x)) * self.scale


def test_training_code_in_another_thread_is_unaffected_while_compiling():
    arrived, release = threading.Event(), threading.Event()
    results: dict[str, object] = {}

    def train() -> None:
        assert arrived.wait(20)  # the compile is inside the trace now
        x = torch.randn(3, requires_grad=True)
        Triple.apply(x).sum().backward()
        warnings.warn("mine", UserWarning, stacklevel=1)
        results["grad"] = x.grad
        release.set()

    worker = threading.Thread(target=train)
    with warnings.catch_warnings(record=True) as shown:  # the process's handler
        warnings.simplefilter("always")
        worker.start()
        try:
            art = t2n.compile(Gate(arrived, release, 2.0), (torch.randn(1, 2, 8),))
        finally:
            release.set()
            worker.join(30)
    assert torch.equal(results["grad"], torch.full((3,), 7.0))  # Triple.backward ran as written
    assert [str(w.message) for w in shown] == ["mine"]  # shown as usual, not taken by the trace
    assert art.check().ok


def test_two_compiles_in_two_threads_give_each_its_own_model():
    torch.manual_seed(0)
    models = [Functions(), torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh())]
    inputs = [(torch.randn(2, 4),), (torch.randn(5, 4),)]
    arts: list[object] = [None, None]
    errors: list[BaseException] = []
    start = threading.Barrier(2)
    shown_before, filters_before = warnings.showwarning, list(warnings.filters)

    def run(i: int) -> None:
        try:
            start.wait(10)
            for _ in range(3):
                arts[i] = t2n.compile(models[i], inputs[i])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert "cos" in [op.kind for op in arts[0].ir.ops()]
    assert "tanh" in [op.kind for op in arts[1].ir.ops()]
    for art in arts:
        assert art.check().ok
    assert warnings.showwarning is shown_before and warnings.filters == filters_before


def test_function_whose_forward_was_not_recorded_is_named():
    from torch.onnx._internal.torchscript_exporter import _globals

    class M(torch.nn.Module):
        def forward(self, x):
            return Triple.apply(x) + 1

    old = _globals.GLOBALS.autograd_inlining
    _globals.GLOBALS.autograd_inlining = False  # the tracer then keeps no Subgraph
    try:
        with pytest.raises(UnsupportedOpsError) as info:
            t2n.compile(M(), (torch.randn(3),))
    finally:
        _globals.GLOBALS.autograd_inlining = old
    text = str(info.value)
    assert "Triple" in text and "ModuleExtractor" in text


@pytest.mark.parametrize("version", ["2.2.1", "2.3.0", "2.12.1", "2.14.0", "3.0.0", "1.13.1+cu117", "nightly"])
def test_unknown_torch_version_refused_with_the_supported_range(version):
    with pytest.raises(UnsupportedTorchError) as info:
        torch_private.check_torch_version(version)
    assert version in str(info.value) and "torch 2.13.x" in str(info.value)
    assert isinstance(info.value, ImportError)


def test_tested_torch_versions_accepted():
    for version in ("2.13.0", "2.13.0+cpu", "2.13.1"):
        torch_private.check_torch_version(version)


class Zeta(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.special.zeta(x, x)

    @staticmethod
    def backward(ctx, g):  # pragma: no cover
        raise NotImplementedError


class CallsZeta(torch.nn.Module):
    def forward(self, x):
        return Zeta.apply(x)


def test_ops_inside_a_function_keep_their_module_path_and_line():
    model = torch.nn.Sequential(torch.nn.ReLU(), CallsZeta())
    with pytest.raises(UnsupportedOpsError) as info:
        t2n.compile(model, (torch.rand(3) + 1,))
    text = str(info.value)
    assert "aten::special_zeta in module '1'" in text and "test_process_state.py" in text


def test_private_torch_apis_only_in_torch_private():
    import re
    from pathlib import Path

    root = Path(t2n.__file__).parent
    private = re.compile(r"torch\._C\._[a-z]|torch\.jit\._[a-z]|DisableTorchFunction|_create_graph_by_tracing")
    found = [f"{p.relative_to(root)}:{i}" for p in root.rglob("*.py") if p.name != "torch_private.py"
             for i, line in enumerate(p.read_text().splitlines(), 1) if private.search(line)]
    assert found == []
