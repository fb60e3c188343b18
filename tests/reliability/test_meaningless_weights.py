"""Weights that make the model meaningless are reported, and a check whose reference is
itself all NaN fails instead of "verifying" NaN against NaN.

Cases tried (13): a NaN weight and an infinite weight through ``compile`` (a warning
naming the tensor and the counts; ``strict=True`` refuses with
``NonFiniteWeightError`` before anything is written), ``t2n.export`` (the same, and
``check_io=True`` fails), ``compile().save()`` and the drop-in
``export_model_to_nnef`` (its check fails); a bf16 weight beyond f16's range, which
the f16 artifact would hold as an infinity; an f16 buffer holding NaN (an infinite
buffer, a mask, and a ``-inf`` fill computed by the forward are not reported);
``Artifact.check`` with an all-NaN reference, given or computed; the CLI ``t2n export
--check`` and ``--strict``; ``t2n.llm.export_llm`` of a checkpoint folder holding a NaN
weight (its verification fails, the tensor is named).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import t2n
from t2n.errors import CheckMismatchError, NonFiniteWeightError
from t2n.serialize.finite import NonFiniteWeightWarning

X = torch.rand(2, 8)


def _model(value: float = float("nan"), dtype=torch.float32) -> torch.nn.Module:
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4)).to(dtype).eval()
    with torch.no_grad():
        m[0].weight[0, 0] = value
        m[0].weight[2, 3] = value
    return m


def _warned(fn):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = fn()
    found = [w for w in seen if issubclass(w.category, NonFiniteWeightWarning)]
    return result, "\n".join(str(w.message) for w in found)


@pytest.mark.parametrize("value, words", [(float("nan"), "2 NaN"), (float("inf"), "2 infinite")])
def test_compile_names_a_nonfinite_weight(value, words):
    _, message = _warned(lambda: t2n.compile(_model(value), (X,)))
    assert "'0.weight'" in message and words in message and "of 64 values" in message


@pytest.mark.parametrize("entry", ["compile", "export"])
def test_strict_refuses_a_nonfinite_weight_before_writing(tmp_path, entry):
    with pytest.raises(NonFiniteWeightError) as info:
        if entry == "compile":
            t2n.compile(_model(), (X,), strict=True)
        else:
            t2n.export(_model(), (X,), tmp_path / "m.tar", strict=True)
    assert "'0.weight'" in str(info.value) and "2 NaN" in str(info.value)
    assert info.value.names == ["0.weight"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("form", ["m.tar", "m.tgz"])
def test_export_check_fails_when_every_output_is_nan(tmp_path, form):
    with pytest.raises(CheckMismatchError) as info:
        _warned(lambda: t2n.export(_model(), (X,), tmp_path / form, check_io=True))
    assert "all NaN" in str(info.value) and "PyTorch" in str(info.value)


def test_dropin_check_fails_when_every_output_is_nan(tmp_path):
    with pytest.raises(CheckMismatchError, match="all NaN"):
        _warned(lambda: t2n.export_model_to_nnef(_model(), (X,), tmp_path / "m.nnef", t2n.TractNNEF()))


def test_check_fails_on_an_all_nan_reference():
    art = t2n.compile(torch.nn.Linear(8, 4), (X,))
    nan = np.full_like(art.reference_outputs[0], np.nan)
    with pytest.raises(CheckMismatchError) as info:
        art.check(inputs=art.example_inputs, expected=[nan])
    assert "all NaN" in str(info.value)
    assert not info.value.report.ok


def test_a_bf16_weight_beyond_f16_becomes_infinite_and_is_named():
    m = _model(1e6, torch.bfloat16)
    _, message = _warned(lambda: t2n.compile(m, (X.to(torch.bfloat16),)))
    assert "'0.weight'" in message and "beyond f16's range" in message


class Scaled(torch.nn.Module):
    def __init__(self, value):
        super().__init__()
        self.register_buffer("scale", torch.tensor([1.0, value, 2.0, 3.0], dtype=torch.float16))

    def forward(self, x):
        return x * self.scale


def test_a_nan_f16_buffer_is_named():
    _, message = _warned(lambda: t2n.compile(Scaled(float("nan")), (torch.rand(2, 4, dtype=torch.float16),)))
    assert "'scale'" in message and "1 NaN of 4 values" in message


def test_an_infinite_buffer_or_constant_is_no_weight_problem():
    """A ``-inf`` buffer (a mask) or a ``-inf`` fill the forward computes is the model's
    intent: not reported (NaN is)."""
    class Masked(torch.nn.Module):
        def forward(self, x):
            return x.masked_fill(x > 0.5, float("-inf")).softmax(-1)

    _, message = _warned(lambda: t2n.compile(Scaled(float("-inf")), (torch.rand(2, 4, dtype=torch.float16),)))
    _, other = _warned(lambda: t2n.compile(Masked(), (torch.rand(2, 4),)))
    assert message == other == ""


def test_a_finite_model_warns_nothing():
    _, message = _warned(lambda: t2n.compile(_model(0.5), (X,)))
    assert message == ""


@pytest.fixture
def nan_factory(tmp_path: Path) -> Path:
    (tmp_path / "nanmodel.py").write_text(
        "import torch\n\n"
        "def build():\n"
        "    torch.manual_seed(0)\n"
        "    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 4)).eval()\n"
        "    with torch.no_grad():\n"
        "        m[0].weight[1, 1] = float('nan')\n"
        "    return m, (torch.rand(2, 8),)\n")
    return tmp_path


@pytest.mark.parametrize("flag, words", [("--check", "all NaN"), ("--strict", "NonFiniteWeightError")])
def test_cli_export_fails_on_a_nan_weight(nan_factory, flag, words):
    from cli.cli_support import make_runner

    done = make_runner()("export", "nanmodel:build", "-o", nan_factory / "m.tgz", flag, cwd=nan_factory)
    assert done.returncode == 1, done.stdout + done.stderr
    assert words in done.stderr and "weight" in done.stderr
    assert not (nan_factory / "m.tgz").exists() or flag == "--check"


def test_llm_export_of_a_checkpoint_with_a_nan_weight_fails_its_verification(tmp_path):
    from llm.folders import save_checkpoint
    from llm.tiny_models import tiny_model

    from t2n.llm import export_llm

    model = tiny_model("llama")
    with torch.no_grad():
        model.model.norm.weight[3] = float("nan")
    folder = save_checkpoint(model, tmp_path / "ckpt", tokenizer=False)
    with pytest.raises(CheckMismatchError) as info:
        _warned(lambda: export_llm(folder, tmp_path / "out"))
    assert "all NaN" in str(info.value) and "model.norm.weight" in str(info.value)
    assert not os.path.exists(tmp_path / "out")
