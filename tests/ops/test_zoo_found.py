"""Constructs the zoo's transformers classes found missing or wrong, each as a small model
run in tract against PyTorch (the zoo runs the full models, see tests/zoo/models.py)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import t2n
from t2n.errors import UnsupportedOpsError
from t2n.testing import check_export


class RoundF64(nn.Module):
    """I-BERT's integer-only GELU and softmax: ``torch.round`` (and ``floor``) of float64 tensors."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.double() * 0.5
        return torch.round(y) + torch.floor(y / 3)


def test_round_half_to_even_of_float64() -> None:
    x = torch.tensor([[-5.0, -3.0, -1.0, 1.0, 3.0, 5.0, 7.0, 0.4],
                      [-1.4, 1.4, 2.0, -6.0, 14.6, -14.6, 2e6 + 1.0, -0.4]])  # ties after * 0.5
    check_export(RoundF64(), (x,), targets=("tract",))


class ComputedRangeFloatStep(nn.Module):
    """XLNet's relative positions: ``arange(klen, -qlen, -1.0)`` with ``klen = mlen + qlen``
    computed in the model, as int64 and as float."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        qlen = x.size(0)
        klen = x.size(1) + qlen * 0
        ints = torch.arange(klen, -qlen, -1.0, dtype=torch.int64)
        floats = torch.arange(0, klen, 2.0)
        return x.sum(0) * ints[:klen], floats + x[0, : floats.shape[0]]


def test_arange_of_computed_bounds_with_a_whole_float_step() -> None:
    check_export(ComputedRangeFloatStep(), (torch.randn(3, 5),), targets=("tract",))


@torch.jit.script_if_tracing
def _scripted_when_tracing(x: torch.Tensor, n: int) -> torch.Tensor:
    return x[:n] * 2


class CallsScriptIfTracing(nn.Module):
    """VitDet's ``get_rel_pos``: a helper decorated ``torch.jit.script_if_tracing``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _scripted_when_tracing(x, x.shape[0] - 1) + 1


def test_a_scripted_call_inside_the_trace_is_refused_by_name() -> None:
    with pytest.raises(UnsupportedOpsError, match="script_if_tracing"):
        t2n.compile(CallsScriptIfTracing(), (torch.randn(4, 3),), frontend="jit")


@pytest.mark.slow
def test_a_scripted_call_inside_the_trace_read_by_export() -> None:
    check_export(CallsScriptIfTracing(), (torch.randn(4, 3),), targets=("tract",), frontend="export")


class AllTrue(nn.Module):
    """D-FINE's guard, as torch.export records it: ``aten::_is_all_true`` of a bool tensor."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.ops.aten._is_all_true(x > -1.0).float() + torch.ops.aten._is_all_true(x > 0).float()


@pytest.mark.parametrize("frontend", ["jit", "export"])
def test_is_all_true_is_all_of_its_input(frontend: str) -> None:
    x = torch.tensor([[0.5, -0.5, 2.0], [1.0, 3.0, -0.9]])
    check_export(AllTrue(), (x,), targets=("tract",), frontend=frontend)


class ComplexBuffer(nn.Module):
    """Llama 4's rotary table: a complex64 buffer (here read through its real view)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("freqs", torch.polar(torch.ones(4, 3), torch.rand(4, 3)), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2 + 1


def test_a_complex_buffer_does_not_break_the_trace() -> None:
    """The state guard took every buffer's bytes as an NNEF dtype: a complex one raised an
    untyped error before anything was traced."""
    check_export(ComplexBuffer(), (torch.randn(2, 3),), targets=("tract",), frontend="jit")


class RotaryByComplexTables(nn.Module):
    """Llama 4's, Qwen-Image's and Lumina's rotary embedding: the query as complex pairs
    times a complex table, held as a buffer (``polar``) and one made once at trace time."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.register_buffer("freqs", torch.polar(torch.ones(5, 3), torch.rand(5, 3, generator=g) * 6),
                             persistent=False)
        self.angles = torch.rand(5, 3, generator=g) * 6

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = torch.view_as_complex(x.reshape(*x.shape[:-1], 3, 2))
        table = torch.polar(torch.ones_like(self.angles), self.angles)  # a constant of the trace
        freqs = self.freqs.to(x.device)  # Llama 4's move of its table, a no-op
        wide = (freqs.to(torch.complex128) * table.conj()).to(torch.complex64)
        first, rest = wide.split([1, 2], dim=-1)  # Qwen-Image's table, split per position axis
        batched = wide.expand(x.shape[0], -1, -1) * wide.repeat(1, 1)  # over the batch; Lumina's repeat
        return (torch.view_as_real(z * batched).flatten(-2), wide.to(torch.float32),
                torch.view_as_real(first * rest), torch.view_as_real(wide.repeat(2, 1, 2)))


@pytest.mark.parametrize("frontend", ["jit", "export"])
def test_complex_tables_read_by_the_model(frontend: str) -> None:
    """A complex buffer or constant is its (real, imaginary) pair, a variable of its own;
    the jit frontend raised an untyped error on the buffer, the export frontend on both.
    Moves and casts keep the pair (a cast to a real dtype keeps the real part)."""
    check_export(RotaryByComplexTables(), (torch.randn(2, 5, 6),), targets=("tract",), frontend=frontend)
