"""Scripted streaming models (voice-activity detectors built like the TorchScript ones
such models ship as) exported with JIT hardening and run in tract chunk after chunk,
fed the state the artifact returns, against the scripted model called on the same
chunks. State kept in module attributes becomes explicit inputs and outputs; state
that no exported graph can follow is refused by name; and a hardened graph that does
not compute what the scripted model computes is refused before anything is written."""

from __future__ import annotations

import io
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import tract
from vad_models import (
    HIDDEN,
    AttributeStateVAD,
    ExplicitStateVAD,
    History,
    LoopAttributeState,
    RunningNorm,
    scripted,
)

import t2n
from t2n.errors import AttributeStateError, HardeningMismatchError
from t2n.frontend.jit import harden, passes
from t2n.frontend.jit.attribute_state import AttributeStateWarning
from t2n.testing import check_export

CHUNKS = 4
SAMPLES = {8000: 128, 16000: 256, 32000: 512}


def reloaded(module: torch.jit.ScriptModule) -> torch.jit.ScriptModule:
    """The module saved with ``torch.jit.save`` and read back with ``torch.jit.load``."""
    buffer = io.BytesIO()
    torch.jit.save(module, buffer)
    buffer.seek(0)
    return torch.jit.load(buffer)


def runnable(art: t2n.Artifact, folder: Path) -> tract.Runnable:
    art.save(folder)
    return tract.nnef().load(str(folder)).into_runnable()


def close(got: np.ndarray, want: torch.Tensor) -> None:
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("sr", [16000, 8000, 32000])
@pytest.mark.parametrize("load", [False, True], ids=["scripted", "jit_load"])
def test_attribute_state_becomes_inputs_and_outputs(sr: int, load: bool, tmp_path: Path) -> None:
    model = scripted(AttributeStateVAD)
    model = reloaded(model) if load else model
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        model(torch.randn(1, SAMPLES[sr], generator=gen), sr)  # the first call resets the state
        model(torch.randn(1, SAMPLES[sr], generator=gen), sr)  # and the model keeps running
    state, context = model._state.detach().clone(), model._context.detach().clone()
    with pytest.warns(AttributeStateWarning, match=rf"_last_sr = {min(sr, 16000)}, _last_batch_size = 1"):
        art = t2n.compile(model, (torch.randn(1, SAMPLES[sr]), sr), t2n.TractNNEF())
    assert torch.equal(model._state, state) and torch.equal(model._context, context)  # untouched
    assert list(art.rendered.input_ids) == ["input_0", "_state", "_context"]
    assert list(art.rendered.output_ids) == ["output_0", "_state_out", "_context_out"]
    run = runnable(art, tmp_path / "vad")
    state_np, context_np = state.numpy(), context.numpy()
    for _ in range(CHUNKS):
        chunk = torch.randn(1, SAMPLES[sr], generator=gen)
        prob, state_np, context_np = (t.to_numpy() for t in run.run([chunk.numpy(), state_np, context_np]))
        with torch.no_grad():
            want = model(chunk, sr)
        close(prob, want)
        close(state_np, model._state)
        close(context_np, model._context)


def test_a_fresh_model_that_resets_on_its_first_call_is_refused_by_name(tmp_path: Path) -> None:
    model = scripted(AttributeStateVAD)
    with pytest.raises(AttributeStateError, match=r"_last_sr: 0 before the call, 16000 after.*call the model "
                                                  r"once") as err:
        t2n.export(model, (torch.randn(1, 256), 16000), tmp_path / "vad.nnef.tar", t2n.TractNNEF())
    assert err.value.attributes == ["_last_sr", "_last_batch_size"]
    assert os.listdir(tmp_path) == []
    assert model._last_sr == 0 and model._context.numel() == 0  # the model is as it was
    assert torch.equal(model._state, torch.zeros(2, 1, HIDDEN))


@pytest.mark.parametrize("load", [False, True], ids=["scripted", "jit_load"])
def test_state_through_arguments_over_chunks(load: bool, tmp_path: Path) -> None:
    model = scripted(ExplicitStateVAD)
    model = reloaded(model) if load else model
    art = t2n.compile(model, (torch.randn(2, 512), torch.zeros(2, 2, HIDDEN), 32000), t2n.TractNNEF())
    run = runnable(art, tmp_path / "vad")
    gen = torch.Generator().manual_seed(2)
    state = torch.zeros(2, 2, HIDDEN)
    got_state = state.numpy()
    for _ in range(CHUNKS):
        chunk = torch.randn(2, 512, generator=gen)
        prob, got_state = (t.to_numpy() for t in run.run([chunk.numpy(), got_state]))
        with torch.no_grad():
            want, state = model(chunk, state, 32000)
        close(prob, want)
        close(got_state, state)


def test_attribute_written_in_a_loop_and_a_branch(tmp_path: Path) -> None:
    model = scripted(LoopAttributeState)
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        model(torch.randn(1, HIDDEN, generator=gen), True)
    art = t2n.compile(model, (torch.randn(1, HIDDEN), False), t2n.TractNNEF())
    assert list(art.rendered.input_ids) == ["input_0", "_h"]
    run = runnable(art, tmp_path / "loop")
    h = model._h.detach().numpy()
    for _ in range(CHUNKS):
        x = torch.randn(1, HIDDEN, generator=gen)
        out, h = (t.to_numpy() for t in run.run([x.numpy(), h]))
        with torch.no_grad():
            want = model(x, False)
        close(out, want)
        close(h, model._h)
    reset = t2n.compile(model, (torch.randn(1, HIDDEN), True), t2n.TractNNEF())
    assert reset.check().ok  # the other branch: a state input the graph does not read


def test_buffer_written_in_place_is_state(tmp_path: Path) -> None:
    model = scripted(RunningNorm)
    before = model.mean.clone()
    art = t2n.compile(model, (torch.randn(3, HIDDEN),), t2n.TractNNEF())
    assert torch.equal(model.mean, before)
    assert list(art.rendered.input_ids) == ["input_0", "mean"]
    assert "mean.dat" not in art.tensor_files
    run = runnable(art, tmp_path / "norm")
    mean = before.numpy()
    gen = torch.Generator().manual_seed(4)
    for _ in range(CHUNKS):
        x = torch.randn(3, HIDDEN, generator=gen)
        out, mean = (t.to_numpy() for t in run.run([x.numpy(), mean]))
        with torch.no_grad():
            want = model(x)
        close(out, want)
        close(mean, model.mean)


class Branchy(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool(x.mean() > 0):
            return x + 1.0
        return x - 1.0


def test_a_hardened_graph_that_differs_from_the_scripted_model_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def wrong_branch(s: passes.HardenState) -> int:  # a faulty hardening step
        n = 0
        for node in list(s.graph.block().nodes()):
            if node.kind() == "prim::If" and node.inputsAt(0).node().kind() != "prim::Constant":
                passes.replace_with_constant(s.graph, node.inputsAt(0), False)
                n += 1
        return n

    steps = [(name, wrong_branch if name == "fold_data_dependent_ifs" else step)
             for name, step in harden.PROBING_STEPS]
    monkeypatch.setattr(harden, "PROBING_STEPS", steps)
    model = torch.jit.script(Branchy())
    x = torch.rand(2, 3) + 0.5
    with pytest.raises(HardeningMismatchError, match=r"output 0: max abs difference 2"):
        t2n.export(model, (x,), tmp_path / "m.nnef.tar", t2n.TractNNEF())
    assert os.listdir(tmp_path) == []


def test_list_attributes_are_refused_by_name() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(AttributeStateError, match=r"seen \(list\).*tensor attributes") as err:
            t2n.compile(torch.jit.script(History()), (torch.randn(2, 3),), t2n.TractNNEF())
    assert err.value.attributes == ["seen"]


def test_attribute_state_in_tract_and_khronos() -> None:
    model = scripted(AttributeStateVAD)
    with torch.no_grad():
        model(torch.randn(1, 256), 16000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AttributeStateWarning)
        result = check_export(model, (torch.randn(1, 256), 16000))  # both engines, state in and out
    assert set(result.artifacts) == {"tract", "khronos"}
    check_export(scripted(RunningNorm), (torch.randn(3, HIDDEN),))
