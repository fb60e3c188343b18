"""Complex tensors through indexing ops (rotary tables of torch.polar indexed by position
ids in diffusers' NucleusMoE, Lumina 2 and Z-Image), run in tract against PyTorch on both
frontends: advanced indexing, index_select, gather, chunk, embedding, where, filled
tensors, pad_sequence (real and complex) and writes into views and by scatter, each on
the (real, imaginary) pair of ``t2n.frontend.complex_tensors``."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pad_sequence

import t2n
from t2n.testing import check_export

FRONTENDS = ["jit", pytest.param("export", marks=pytest.mark.slow)]
"""The export frontend's cases (torch.export and its decompositions: most of this file's
time) run in CI's slow step, which keeps the README's test command under 2 minutes."""


def table(angles: torch.Tensor) -> torch.Tensor:
    """A complex table whose moduli differ per element (a swap of re/im, or of rows, shows)."""
    return torch.polar(1.0 + angles.abs(), angles)


class AdvancedIndex(nn.Module):
    """``z[ids]``, ``z[:, ids]`` (a None entry), ``z[ids, ids2]`` (adjacent), ``z[ids, :, ids2]``
    (apart: PyTorch moves the index axes first) and ``z[const, :, -1]``, with negative
    indices from the input and in constants."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("angles", torch.linspace(-3.0, 3.0, 5 * 4 * 3).reshape(5, 4, 3))

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        z, w = table(self.angles), table(x)
        ids2 = ids.flip(0) % 3
        rows = torch.tensor([-1, 0, 2])
        return (torch.view_as_real(z[ids]), torch.view_as_real(z[:, ids % 4]),
                torch.view_as_real(z[ids, ids2]), torch.view_as_real(z[ids, :, ids2]),
                torch.view_as_real(z[rows, :, -1]),
                torch.view_as_real(w[ids % 2]) * 2.0)


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_complex_advanced_index(frontend: str) -> None:
    ids = torch.tensor([0, -1, 3, -5, 2, 2])
    check_export(AdvancedIndex(), (torch.randn(2, 6), ids), targets=("tract",), frontend=frontend)


class IndexSelect(nn.Module):
    """``index_select`` on axis 0 and on axis -1 (counted on the complex tensor, not on its
    pair), by the input and by a constant."""

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        z = table(x)
        const = torch.tensor([4, 0, 1])
        return (torch.view_as_real(torch.index_select(z, 0, ids)),
                torch.view_as_real(torch.index_select(z, -1, ids)),
                torch.view_as_real(z.index_select(1, const)))


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_complex_index_select(frontend: str) -> None:
    check_export(IndexSelect(), (torch.randn(5, 5), torch.tensor([3, 1, 1, 0])), targets=("tract",),
                 frontend=frontend)


class Gather(nn.Module):
    """Lumina 2's rotary lookup: a table repeated over the batch, gathered on axis 1 by
    ids expanded over the frequencies; and a gather on the last axis with smaller indices."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("angles", torch.linspace(-2.0, 2.0, 6 * 4).reshape(6, 4))

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = table(self.angles)
        index = ids.unsqueeze(-1).expand(-1, -1, 4)
        looked_up = torch.gather(z.unsqueeze(0).repeat(ids.shape[0], 1, 1), dim=1, index=index)
        last = torch.gather(z, -1, torch.tensor([[3, 0], [1, 1], [2, 3]]))
        return torch.view_as_real(looked_up), torch.view_as_real(last)


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_complex_gather(frontend: str) -> None:
    check_export(Gather(), (torch.tensor([[5, 0, 2], [1, 1, 4]]),), targets=("tract",), frontend=frontend)


class Chunk(nn.Module):
    """NucleusMoE's rotary table chunked per position axis: on the last axis (counted on
    the complex tensor, not its pair), into two and three pieces, then indexed."""

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a, b = table(x).chunk(2, dim=-1)
        c, d, e = table(x).chunk(3, dim=0)
        return (torch.view_as_real(a[ids]), torch.view_as_real(b * 2), torch.view_as_real(c + d),
                torch.view_as_real(e))


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_complex_chunk(frontend: str) -> None:
    check_export(Chunk(), (torch.randn(7, 6), torch.tensor([6, -2, 0])), targets=("tract",), frontend=frontend)


class Embedding(nn.Module):
    """A complex weight read by ``F.embedding``."""

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(F.embedding(ids, table(x)))


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_complex_embedding(frontend: str) -> None:
    check_export(Embedding(), (torch.randn(5, 3), torch.tensor([[4, 0], [2, 2]])), targets=("tract",),
                 frontend=frontend)


class Filled(nn.Module):
    """Filled tensors of a complex dtype, of a complex value, and shaped or typed like a
    complex tensor, each added to a complex table (a lost imaginary part shows)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        z = table(x)
        full = torch.full((2, 3), 1.5 - 2.0j) + z
        zeros = torch.zeros(2, 3, dtype=torch.complex64) + z * 2
        ones = torch.ones(3, dtype=torch.complex64) * z
        like = torch.full_like(z, 0.5 + 1.0j) * z + torch.ones_like(z)
        new = z.new_full((2, 3), -1.0j) + z.new_zeros((3,))
        real_like = torch.zeros_like(x, dtype=torch.complex64) + 1j * x
        return tuple(torch.view_as_real(v) for v in (full, zeros, ones, like, new, real_like))


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_complex_filled(frontend: str) -> None:
    check_export(Filled(), (torch.randn(2, 3),), targets=("tract",), frontend=frontend)


class Where(nn.Module):
    """``where`` between complex tensors, a complex and a real one, and a complex number."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        z, w = table(x), table(x.flip(0))
        cond = x > 0
        return (torch.view_as_real(torch.where(cond, z, w)), torch.view_as_real(torch.where(cond, x, z)),
                torch.view_as_real(torch.where(cond[0], z, 2.0 - 1.0j)))


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_complex_where(frontend: str) -> None:
    check_export(Where(), (torch.randn(3, 4),), targets=("tract",), frontend=frontend)


class PadSequence(nn.Module):
    """Z-Image's batch of sequences of different lengths: ``pad_sequence`` batch first or
    not, padded with zero or another value, on the right or on the left."""

    def __init__(self, complex_: bool, batch_first: bool, value: float, side: str) -> None:
        super().__init__()
        self.complex_, self.batch_first, self.value, self.side = complex_, batch_first, value, side

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seqs = [x[:3], x[3:4], x[4:]] if not self.complex_ else [table(x[:3]), table(x[3:4]), table(x[4:])]
        out = pad_sequence(seqs, batch_first=self.batch_first, padding_value=self.value, padding_side=self.side)
        return torch.view_as_real(out) if self.complex_ else out


@pytest.mark.parametrize("frontend", FRONTENDS)
@pytest.mark.parametrize(("complex_", "batch_first", "value", "side"), [
    (True, True, 0.0, "right"), (True, False, 1.5, "left"), (False, True, -2.0, "right"),
    (False, False, 0.0, "left")])
def test_pad_sequence(frontend: str, complex_: bool, batch_first: bool, value: float, side: str) -> None:
    check_export(PadSequence(complex_, batch_first, value, side), (torch.randn(9, 2),), targets=("tract",),
                 frontend=frontend)


class ConstantMask(nn.Module):
    """A boolean mask made of constants: its positions are known at export."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = torch.tensor([True, False, True, True])
        return torch.view_as_real(table(x)[:, mask])


def test_complex_index_by_constant_mask() -> None:
    """jit only: torch.export takes the mask's count of True for a size made from data."""
    check_export(ConstantMask(), (torch.randn(3, 4),), targets=("tract",), frontend="jit")


class WritesIntoViews(nn.Module):
    """Lumina 2's rotary tables for captions and images: complex zeros written row by row
    through views (``copy_`` into a slice of a select in jit, ``slice_scatter`` and
    ``select_scatter`` in torch.export), a filled entry, a zeroed chunk piece, and the
    functional scatters called by name."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = table(x)
        out = torch.zeros(2, 4, 3, dtype=torch.complex64)
        for i, n in enumerate((3, 2)):
            out[i, :n] = z[i, 1:n + 1]
        out[1, -1] = 2.0 - 1.0j
        first, _ = out.chunk(2, dim=-2)
        first[:, :, -1].zero_()
        scattered = torch.select_scatter(out, z[:, 4], 1, -1) + torch.slice_scatter(out, z[:, :2], 1, 1, 3)
        return torch.view_as_real(out * 2), torch.view_as_real(scattered)


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_complex_writes_into_views(frontend: str) -> None:
    check_export(WritesIntoViews(), (torch.randn(2, 5, 3),), targets=("tract",), frontend=frontend)


class RunTimeMask(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(table(x)[x > 0])


def test_complex_index_by_run_time_mask_follows_the_count() -> None:
    """A mask known only at run time selects as many elements as it holds True."""
    model = RunTimeMask()
    art = t2n.compile(model, (torch.randn(4, 3),), frontend="jit")
    for x in (torch.randn(4, 3), torch.ones(4, 3), -torch.ones(4, 3)):
        with torch.no_grad():
            want = model(x).numpy()
        assert art.check(inputs=[x.numpy()], expected=[want]).ok
