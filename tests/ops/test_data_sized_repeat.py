"""``torch.repeat_interleave`` with repeats computed in the model (FastSpeech2's length
regulator: durations from a predictor). The output's length comes from the data: tract
computes it while running (a ``range`` to the repeats' sum, compared with their running
totals, then a gather). Each artifact is compiled once and run in tract at inputs other
than the traced example, durations giving other output lengths, against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import t2n
from t2n.errors import ExportFrontendError, NotExpressibleError
from t2n.testing import Lambda, check_export

GEN = torch.Generator().manual_seed(0)


def run_at(art: t2n.Artifact, model: nn.Module, *inputs: torch.Tensor) -> tuple[int, ...]:
    """Run ``art`` in tract on ``inputs`` against PyTorch; the outputs' shapes."""
    with torch.no_grad():
        out = model(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    report = art.check(inputs=[i.numpy() for i in inputs], expected=[o.numpy() for o in outs])
    assert report.ok, report
    return tuple(outs[0].shape)


def durations(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


class Regulated(nn.Module):
    """Durations rounded from a float input, each step of ``x`` repeated that often."""

    def forward(self, x: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        reps = torch.clamp(torch.round(d * 2), min=0).long()
        return torch.repeat_interleave(x, reps, dim=1) * 2


X = torch.randn(1, 5, 3, generator=GEN)


def test_output_length_follows_the_durations() -> None:
    model = Regulated()
    art = check_export(model, (X, durations(0.5, 1, 1.5, 0.2, 2)), khronos_refuses="range").artifacts["tract"]
    lengths = {run_at(art, model, X, d)[1] for d in (
        durations(0.5, 1, 1.5, 0.2, 2), durations(3, 3, 3, 3, 3), durations(0.6, 0, 0, 0, 0),
        durations(0, 0, 0, 0, 4.1), torch.rand(5, generator=GEN) * 4)}
    assert len(lengths) == 5, lengths


def test_all_zero_durations_give_an_empty_output_as_pytorch() -> None:
    model = Regulated()
    art = t2n.compile(model, (X, durations(1, 1, 1, 1, 1)))
    assert run_at(art, model, X, durations(0, 0, 0, 0, 0)) == (1, 0, 3)


def test_with_the_phoneme_count_dynamic_too() -> None:
    model = Regulated()
    art = t2n.compile(model, (X, durations(1, 1, 1, 1, 1)), dynamic_axes={"input_0": {1: "T"}, "input_1": {0: "T"}})
    for steps in (5, 2, 9):
        x = torch.randn(1, steps, 3, generator=GEN)
        for d in (torch.rand(steps, generator=GEN) * 3, torch.zeros(steps) + 1.1):
            run_at(art, model, x, d)


def test_a_single_repeat_count_from_data_and_the_indices_form() -> None:
    """``x.repeat_interleave(n)`` with ``n`` a 0-d tensor, and ``repeat_interleave(repeats)``
    (the indices) with computed repeats."""
    model = Lambda(lambda x, n: (x.repeat_interleave(n, dim=0), torch.repeat_interleave(n.view(1).expand(3) + 1)))
    x = torch.randn(3, 2, generator=GEN)
    art = t2n.compile(model, (x, torch.tensor(2)))
    for n in (2, 1, 4, 0):
        run_at(art, model, x, torch.tensor(n))


def test_flattened_when_no_dim_is_given() -> None:
    model = Lambda(lambda x, d: torch.repeat_interleave(x, d.long()))
    x = torch.randn(2, 3, generator=GEN)
    art = t2n.compile(model, (x, torch.tensor([1, 0, 2, 1, 1, 3])))
    run_at(art, model, x, torch.tensor([0, 4, 0, 1, 0, 2]))


def test_a_given_output_size_is_static() -> None:
    model = Lambda(lambda x, d: torch.repeat_interleave(x, d.long(), dim=0, output_size=6))
    x = torch.randn(3, 2, generator=GEN)
    art = t2n.compile(model, (x, torch.tensor([1, 2, 3])))
    assert "tract_core_range" not in art.graph_nnef
    run_at(art, model, x, torch.tensor([4, 0, 2]))


class LengthRegulator(nn.Module):
    """FastSpeech2's variance adaptor in small: a duration predictor on the encoder
    output, the length regulator, and a decoder (convolution, linear) on the frames."""

    def __init__(self) -> None:
        super().__init__()
        self.duration = nn.Linear(8, 1)
        self.decoder = nn.Conv1d(8, 8, 3, padding=1)
        self.mel = nn.Linear(8, 4)
        with torch.no_grad():
            self.duration.bias.fill_(1.0)

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        log_d = self.duration(h).squeeze(-1)
        d = torch.clamp(torch.round(torch.exp(log_d) - 1.0), min=0).long()
        frames = torch.repeat_interleave(h, d[0], dim=1)
        y = self.decoder(frames.transpose(1, 2)).transpose(1, 2)
        return self.mel(torch.relu(y)), d


@pytest.mark.parametrize("frontend", ["jit", pytest.param("export", marks=pytest.mark.slow)])
def test_length_regulator_in_both_frontends(frontend: str) -> None:
    torch.manual_seed(0)
    model = LengthRegulator().eval()
    art = t2n.compile(model, (torch.randn(1, 6, 8, generator=GEN),), frontend=frontend,
                      dynamic_axes={"input_0": {1: "T"}})
    lengths = set()
    for steps in (6, 3, 11):
        for scale in (1.0, 2.0):
            lengths.add(run_at(art, model, torch.randn(1, steps, 8, generator=GEN) * scale)[1])
    assert len(lengths) >= 4, lengths


class Batched(nn.Module):
    """The batched length regulator as an alignment matrix (VITS' ``generate_path``): one
    frame range to the longest total, each frame matched to the step it falls in."""

    def forward(self, x: torch.Tensor, d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        d = d.long()
        end = torch.cumsum(d, 1)
        frame = torch.arange(end[:, -1].max())[None, :, None]
        align = (frame >= (end - d)[:, None, :]) & (frame < end[:, None, :])
        return torch.matmul(align.to(x.dtype), x), align.any(-1)


def test_batched_durations_as_an_alignment_matrix() -> None:
    model = Batched()
    x = torch.randn(2, 5, 3, generator=GEN)
    art = t2n.compile(model, (x, torch.randint(0, 4, (2, 5), generator=GEN).float()))
    for _ in range(3):
        run_at(art, model, x, torch.randint(0, 4, (2, 5), generator=GEN).float())


class Positional(nn.Module):
    """Positions added to the regulated frames, from a table cut to their length, from a
    range to it, and the length itself as an output (FastSpeech2's decoder input)."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(100, 3, generator=GEN))

    def forward(self, x: torch.Tensor, d: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = torch.repeat_interleave(x, d.long(), dim=1)
        pos = torch.arange(y.shape[1])
        return (y + self.table[: y.shape[1]], y * torch.sin(pos[:, None] * 0.1),
                self.table.index_select(0, pos), torch.tensor(y.shape[1]))


def test_positions_and_the_length_of_the_regulated_frames() -> None:
    """A slice to the length, a range to it and the length as a value read the length
    tract names while running (they are not written into graph.nnef)."""
    model = Positional()
    art = t2n.compile(model, (X, durations(1, 2, 0, 1, 1)))
    for d in (durations(1, 2, 0, 1, 1), durations(4, 4, 4, 4, 4), durations(0, 0, 1, 0, 0)):
        run_at(art, model, X, d)


class PaddedRows(nn.Module):
    """transformers' FastSpeech2 ``length_regulator``: each row regulated on its own and
    written into zeros as long as the longest (``out[i, :len(r)] = r``), with the frames
    along axis 1, or (``frames_last``) along axis 2."""

    def __init__(self, frames_last: bool = False) -> None:
        super().__init__()
        self.frames_last = frames_last

    def forward(self, x: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        reps = d.long()
        longest = reps.sum(dim=1).max()
        size = (x.size(0), x.size(2), longest) if self.frames_last else (x.size(0), longest, x.size(2))
        out = torch.zeros(size)
        for i, (row, r) in enumerate(zip(x, reps)):
            frames = torch.repeat_interleave(row, r, dim=0)
            if self.frames_last:
                out[i, :, : frames.size(0)] = frames.t() + 1
            else:
                out[i, : frames.size(0)] = frames
        return out * 2


@pytest.mark.parametrize("frames_last", [False, True], ids=["frames_axis_1", "frames_axis_2"])
def test_rows_written_into_zeros_as_long_as_the_longest(frames_last: bool) -> None:
    """The write into ``out[i, :n]``, ``n`` a length from data, is a scatter of the
    row's first ``n`` frames: rows of other lengths, the longest changing, match PyTorch."""
    model = PaddedRows(frames_last)
    x = torch.randn(2, 5, 3, generator=GEN)
    art = t2n.compile(model, (x, torch.tensor([[1, 2, 0, 3, 1], [2, 2, 2, 1, 0]]).float()))
    shapes = {run_at(art, model, torch.randn(2, 5, 3, generator=GEN), d) for d in (
        durations(4, 0, 0, 3, 1, 1, 1, 1, 1, 1).reshape(2, 5), durations(1, 1, 1, 1, 1, 5, 5, 0, 0, 1).reshape(2, 5),
        durations(0, 0, 1, 0, 0, 0, 0, 0, 0, 1).reshape(2, 5))}
    assert len(shapes) == 3, shapes


def test_merging_the_data_length_is_refused_before_writing(tmp_path) -> None:
    """Merging the regulated length with another axis needs it in graph.nnef's text:
    refused, naming the op and what to do."""
    model = Lambda(lambda x, d: torch.repeat_interleave(x, d.long(), dim=1).reshape(1, -1))
    with pytest.raises(NotExpressibleError, match=r"computed from tensor data"):
        t2n.export(model, (X, durations(1, 2, 0, 1, 1)), tmp_path / "m.nnef.tgz")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_the_export_frontend_refuses_a_range_to_a_data_value() -> None:
    """The batched form needs ``arange`` to a value from data, which torch.export turns
    into ``.item()``: a typed refusal that points at the jit frontend."""
    x = torch.randn(2, 5, 3, generator=GEN)
    with pytest.raises(ExportFrontendError, match='frontend="jit"'):
        t2n.compile(Batched(), (x, torch.ones(2, 5)), frontend="export")


def test_repeats_sum_matches_numpy_for_many_durations() -> None:
    """The index construction against numpy's repeat, for random durations."""
    model = Lambda(lambda x, d: torch.repeat_interleave(x, d, dim=0))
    x = torch.arange(7.0)
    art = t2n.compile(model, (x, torch.ones(7, dtype=torch.int64)))
    rng = np.random.default_rng(0)
    for _ in range(5):
        d = rng.integers(0, 6, size=7)
        expected = np.repeat(x.numpy(), d)
        assert art.check(inputs=[x.numpy(), d], expected=[expected], tolerance="exact").ok
