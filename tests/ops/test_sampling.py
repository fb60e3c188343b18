"""Random draws inside ``forward`` (VITS' duration predictor and flow draw
``torch.randn``/``randn_like`` noise): refused by default with a typed error naming the
module, op and line; with ``compile(sampling="inputs")`` each draw is a graph input, and
the artifact computes PyTorch's numbers in tract for the same noise (checked with noise
other than the traced draws, and at other sizes under dynamic axes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

import t2n
from t2n.errors import InvalidArgumentError, SamplingOpsError, UnsupportedOpsError
from t2n.frontend.sampling import DRAW_FUNCTIONS
from t2n.testing import Lambda, check_export

GEN = torch.Generator().manual_seed(0)


class Replay(TorchFunctionMode):
    """Each random draw of the model returns the next of ``noise`` (in call order)."""

    def __init__(self, noise: Sequence[torch.Tensor]) -> None:
        super().__init__()
        self.noise = list(noise)

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if getattr(func, "__name__", "") in DRAW_FUNCTIONS:
            given = self.noise.pop(0)
            if func.__name__.endswith("_"):
                return out.copy_(given)
            return given.clone()
        return out


def pytorch_with(model: nn.Module, inputs: Sequence[torch.Tensor], noise: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    with torch.no_grad(), Replay(noise):
        out = model(*inputs)
    return list(out) if isinstance(out, tuple) else [out]


def check_with_noise(art: t2n.Artifact, model: nn.Module, inputs: Sequence[torch.Tensor],
                     noise: Sequence[torch.Tensor]) -> None:
    """Run the artifact in tract on ``inputs`` and ``noise``; PyTorch on the same noise."""
    expected = pytorch_with(model, inputs, noise)
    report = art.check(inputs=[t.numpy() for t in (*inputs, *noise)], expected=[e.numpy() for e in expected])
    assert report.ok, report


class DurationPredictor(nn.Module):
    """VITS' stochastic duration predictor in small: noise the size of the text, shaped
    by a flow-like step conditioned on the encoder output."""

    def __init__(self) -> None:
        super().__init__()
        self.pre = nn.Conv1d(4, 2, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = torch.randn(x.size(0), 2, x.size(2)).to(dtype=x.dtype) * 0.8
        h = self.pre(x)
        return torch.exp(z * torch.sigmoid(h) + h).sum(1, keepdim=True)


class Vits(nn.Module):
    """A duration predictor and a prior sampled as ``m + randn_like(m) * exp(logs)``."""

    def __init__(self) -> None:
        super().__init__()
        self.dp = DurationPredictor()
        self.proj = nn.Conv1d(4, 8, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.dp(x)
        m, logs = self.proj(x).chunk(2, 1)
        z = m + torch.randn_like(m) * torch.exp(logs) * 0.667
        return w, z


X = torch.randn(1, 4, 7, generator=GEN)


def test_draws_are_refused_by_default_naming_module_op_and_line() -> None:
    with pytest.raises(SamplingOpsError) as info:
        t2n.compile(Vits(), (X,))
    text = str(info.value)
    assert "aten::randn in module 'dp'" in text and "aten::randn_like in the top-level module" in text
    assert "test_sampling.py" in text and 'sampling="inputs"' in text
    assert isinstance(info.value, UnsupportedOpsError)
    assert info.value.ops == ["aten::randn", "aten::randn_like"]


def test_a_bad_sampling_value_is_refused_before_the_trace() -> None:
    with pytest.raises(InvalidArgumentError, match="sampling must be one of 'refuse', 'inputs'"):
        t2n.compile(Vits(), (X,), sampling="zeros")


def test_noise_inputs_compute_pytorchs_numbers_for_the_same_noise() -> None:
    model = Vits().eval()
    art = check_export(model, (X,), targets=("tract",), sampling="inputs").artifacts["tract"]
    assert art.input_names == ["input_0", "noise_0", "noise_1"]
    described = art.stats["noise_inputs"]
    assert [(d["name"], d["op"], d["module"], d["shape"]) for d in described] == [
        ("noise_0", "aten::randn", "dp", [1, 2, 7]), ("noise_1", "aten::randn_like", "", [1, 4, 7])]
    assert art.check().ok  # the draws PyTorch made while tracing are the example noise
    for scale in (1.0, 0.0, 3.0):
        x = torch.randn(1, 4, 7, generator=GEN)
        noise = [torch.randn(1, 2, 7, generator=GEN) * scale, torch.randn(1, 4, 7, generator=GEN) * scale]
        check_with_noise(art, model, [x], noise)


def test_noise_inputs_follow_dynamic_axes_by_themselves() -> None:
    """Their sizes are those of the draw's size argument or of the tensor it is drawn
    like, so they follow the text length without being named in dynamic_axes."""
    model = Vits().eval()
    art = t2n.compile(model, (X,), sampling="inputs", dynamic_axes={"input_0": {2: "T"}})
    assert "noise_0 = external<scalar>(shape = [1, 2, T])" in art.graph_nnef
    for steps in (7, 2, 12):
        x = torch.randn(1, 4, steps, generator=GEN)
        check_with_noise(art, model, [x], [torch.randn(1, 2, steps, generator=GEN), torch.randn(1, 4, steps, generator=GEN)])


def test_other_draws_and_an_unused_one() -> None:
    """``rand``, in-place ``normal_``, ``normal(mean, std)``; a draw whose result is
    unused is no input."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        _ = torch.rand(5)
        e = torch.empty_like(x).normal_()
        u = torch.rand(x.shape)
        return x * e + torch.normal(x, 0.5) + (u < 0.5).float()

    model = Lambda(fn)
    art = check_export(model, (X,), targets=("tract",), sampling="inputs").artifacts["tract"]
    assert [d["op"] for d in art.stats["noise_inputs"]] == ["aten::normal_", "aten::rand", "aten::normal"]
    noise = [torch.randn(1, 4, 7, generator=GEN), torch.rand(1, 4, 7, generator=GEN),
             torch.randn(1, 4, 7, generator=GEN)]
    expected = (X * noise[0] + noise[2] + (noise[1] < 0.5).float()).numpy()
    assert art.check(inputs=[X.numpy(), *(n.numpy() for n in noise)], expected=[expected]).ok


@pytest.mark.slow
def test_export_frontend_makes_the_same_inputs() -> None:
    model = Vits().eval()
    art = t2n.compile(model, (X,), sampling="inputs", frontend="export", dynamic_axes={"input_0": {2: "T"}})
    assert art.input_names == ["input_0", "noise_0", "noise_1"]
    assert art.check().ok
    for steps in (7, 3):
        x = torch.randn(1, 4, steps, generator=GEN)
        check_with_noise(art, model, [x], [torch.randn(1, 2, steps, generator=GEN), torch.randn(1, 4, steps, generator=GEN)])


def test_a_draw_sized_from_tensor_data_is_refused() -> None:
    """VITS' flow draws noise as long as the regulated frames: no graph input can have
    a length tract learns only while running."""

    def fn(x: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        y = torch.repeat_interleave(x, d.long(), dim=2)
        return y + torch.randn_like(y)

    with pytest.raises(UnsupportedOpsError, match=r"aten::randn_like.*size is computed from tensor data") as info:
        t2n.compile(Lambda(fn), (X, torch.ones(7)), sampling="inputs")
    assert not isinstance(info.value, SamplingOpsError)  # its advice (sampling="inputs") would not help


@pytest.mark.slow
def test_noise_inputs_run_in_khronos_too() -> None:
    check_export(Lambda(lambda x: x + torch.randn_like(x) * 0.1), (X,), sampling="inputs")


def test_dropout_in_training_mode_is_refused() -> None:
    model = Lambda(lambda x: nn.functional.dropout(x, 0.5, training=True))
    with pytest.raises(UnsupportedOpsError, match=r"aten::dropout with training=True draws a random mask"):
        t2n.compile(model, (X,))
    check_export(Lambda(lambda x: nn.functional.dropout(x, 0.5, training=False) * 2), (X,), targets=("tract",))
