"""``torch.istft`` in tract: each frame transformed back by tract's FFT, windowed and
overlap-added with static pads, so the frame count may be a dynamic axis. Every case
runs in tract against PyTorch (the window, hop, centre, normalisation, one-sidedness,
``length`` and ``return_complex`` forms PyTorch accepts); Khronos NNEF refuses the
Fourier transform by name. HDemucs' spectrogram round trip is the model-sized case."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import t2n
from t2n.errors import ExportSpecializationError, TraceError
from t2n.testing import check_export


def spectrum(signal: torch.Tensor, n_fft: int, hop: int, win: int | None, window: torch.Tensor | None,
             **kw: Any) -> torch.Tensor:
    """``torch.stft`` of ``signal`` as real pairs (the model's input)."""
    z = torch.stft(signal, n_fft, hop, win, window=window, return_complex=True, **kw)
    return torch.view_as_real(z).contiguous()


class ISTFT(nn.Module):
    def __init__(self, n_fft: int, hop: int | None, win: int | None, window: torch.Tensor | None,
                 **kw: Any) -> None:
        super().__init__()
        self.n_fft, self.hop, self.win, self.kw = n_fft, hop, win, kw
        self.register_buffer("window", window)

    def forward(self, spec: torch.Tensor) -> torch.Tensor:
        return torch.istft(torch.view_as_complex(spec), self.n_fft, self.hop, self.win, window=self.window,
                           **self.kw)


SIGNAL = torch.randn(2, 200, generator=torch.Generator().manual_seed(0))

# (n_fft, hop, win_length, window, istft keywords, stft keywords)
CASES: dict[str, tuple[int, int | None, int | None, str | None, dict[str, Any], dict[str, Any]]] = {
    "hann_centred": (16, 4, None, "hann", {}, {}),
    "length_equal": (16, 4, None, "hann", {"length": 200}, {}),
    "length_shorter_normalized": (16, 4, None, "hann", {"normalized": True, "length": 190}, {"normalized": True}),
    "length_past_the_signal": (16, 4, None, None, {"center": False, "length": 300}, {"center": False}),
    "not_centred": (16, 4, None, "hamming", {"center": False}, {"center": False}),
    "odd_n_fft": (15, 5, None, "hann", {}, {}),
    "hop_not_dividing": (16, 5, 12, "hann", {}, {}),
    "short_window": (16, 4, 8, None, {}, {}),
    "no_window": (16, 4, None, None, {}, {}),
    "default_hop": (32, None, None, "hann", {}, {}),
    "two_sided": (16, 4, None, "hann", {"onesided": False}, {"onesided": False}),
    "hamming_normalized": (20, 8, None, "hamming", {"normalized": True, "length": 230}, {"normalized": True}),
}


def _window(kind: str | None, length: int) -> torch.Tensor | None:
    return None if kind is None else {"hann": torch.hann_window, "hamming": torch.hamming_window}[kind](length)


@pytest.mark.parametrize("case", list(CASES))
def test_istft_forms_match_pytorch_in_tract(case: str) -> None:
    n_fft, hop, win, kind, kw, stft_kw = CASES[case]
    window = _window(kind, win or n_fft)
    spec = spectrum(SIGNAL, n_fft, hop, win, window, **stft_kw)
    check_export(ISTFT(n_fft, hop, win, window, **kw), (spec,), khronos_refuses="fft")


def test_one_signal_without_a_batch_axis() -> None:
    window = torch.hann_window(16)
    check_export(ISTFT(16, 4, None, window), (spectrum(SIGNAL[0], 16, 4, None, window),), targets=("tract",))


def test_return_complex_of_a_two_sided_spectrum() -> None:
    """The inverse of a complex signal's STFT, returned complex (as real pairs)."""
    window = torch.hann_window(16)
    z = torch.stft(torch.randn(2, 100, dtype=torch.complex64), 16, 4, window=window, return_complex=True)

    class Complex(nn.Module):
        def forward(self, spec: torch.Tensor) -> torch.Tensor:
            out = torch.istft(torch.view_as_complex(spec), 16, 4, window=window, onesided=False, return_complex=True)
            return torch.view_as_real(out)

    check_export(Complex(), (torch.view_as_real(z).contiguous(),), targets=("tract",))


def test_forms_pytorch_refuses_are_refused() -> None:
    window = torch.hann_window(16)
    spec = spectrum(SIGNAL, 16, 4, None, window)

    class OneSidedComplex(nn.Module):
        def forward(self, s: torch.Tensor) -> torch.Tensor:
            return torch.view_as_real(torch.istft(torch.view_as_complex(s), 16, 4, window=window,
                                                  return_complex=True))

    with pytest.raises(TraceError, match="onesided"):  # PyTorch itself raises while tracing
        t2n.compile(OneSidedComplex(), (spec,))


def test_the_frame_count_is_a_dynamic_axis() -> None:
    """One artifact for spectra of any length: the overlap-add pads are static."""
    window = torch.hann_window(32)
    model = ISTFT(32, 8, None, window).eval()
    art = t2n.compile(model, (spectrum(SIGNAL, 32, 8, None, window),), dynamic_axes={"input_0": {2: "N"}})
    for samples in (200, 40, 333):
        spec = spectrum(torch.randn(2, samples), 32, 8, None, window)
        with torch.no_grad():
            expected = model(spec).numpy()
        assert art.check(inputs=[spec.numpy()], expected=[expected]).ok, samples


class RoundTrip(nn.Module):
    """STFT, a gain on the spectrum, inverse STFT back to the input's length."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        window = torch.hann_window(32)
        z = torch.stft(x, 32, 8, window=window, return_complex=True)
        return torch.istft(z * 0.5, 32, 8, window=window, length=x.shape[-1])


def test_round_trip_with_the_signal_length_dynamic() -> None:
    """``length=x.shape[-1]`` follows the dynamic axis (it is not baked in)."""
    model = RoundTrip()
    art = t2n.compile(model, (torch.randn(2, 160),), dynamic_axes={"input_0": {1: "T"}})
    for samples in (160, 100, 257):
        x = torch.randn(2, samples)
        assert art.check(inputs=[x.numpy()], expected=[model(x).numpy()]).ok, samples


@pytest.mark.slow
def test_the_export_frontend_keeps_stft_and_istft_whole() -> None:
    check_export(RoundTrip(), (torch.randn(1, 64),), targets=("tract",), frontend="export")


@pytest.mark.slow
def test_the_export_frontend_with_a_dynamic_frame_count() -> None:
    window = torch.hann_window(32)
    model = ISTFT(32, 8, None, window).eval()
    art = t2n.compile(model, (spectrum(SIGNAL, 32, 8, None, window),), frontend="export",
                      dynamic_axes={"input_0": {2: "N"}})
    for samples in (200, 40):
        spec = spectrum(torch.randn(2, samples), 32, 8, None, window)
        with torch.no_grad():
            expected = model(spec).numpy()
        assert art.check(inputs=[spec.numpy()], expected=[expected]).ok, samples


@pytest.mark.slow
def test_the_export_frontend_refuses_a_dynamic_stft_input_by_torchs_own_guard() -> None:
    """torch.export itself specialises ``stft`` of a dynamic signal length (its guard on
    the frame count): a typed refusal naming the input, the jit frontend exports it."""
    with pytest.raises(ExportSpecializationError, match="input_0"):
        t2n.compile(RoundTrip(), (torch.randn(2, 160),), frontend="export", dynamic_axes={"input_0": {1: "T"}})


# -- HDemucs' spectrogram round trip (torchaudio.models.HDemucs._spec/_ispec) ----------

class DemucsSpec(nn.Module):
    """The STFT front and inverse back of a hybrid Demucs, with a per-bin gain between:
    reflect-padded signal, normalized centred STFT without the last bin, and the inverse
    to a length rounded up to the hop plus padding, then cut back."""

    def __init__(self, n_fft: int = 64) -> None:
        super().__init__()
        self.n_fft, self.hop = n_fft, n_fft // 4
        self.gain = nn.Parameter(torch.rand(n_fft // 2, 1) + 0.5)

    def spec(self, x: torch.Tensor) -> torch.Tensor:
        hl = self.hop
        le = int(math.ceil(x.shape[-1] / hl))
        pad = hl // 2 * 3
        x = nn.functional.pad(x, (pad, pad + le * hl - x.shape[-1]), mode="reflect")
        z = torch.stft(x.reshape(-1, x.shape[-1]), self.n_fft, hl, window=torch.hann_window(self.n_fft),
                       normalized=True, center=True, return_complex=True, pad_mode="reflect")
        z = z.view(*x.shape[:-1], *z.shape[-2:])[..., :-1, :]
        return z[..., 2: 2 + le]

    def ispec(self, z: torch.Tensor, length: int) -> torch.Tensor:
        hl = self.hop
        z = nn.functional.pad(torch.view_as_real(z), (0, 0, 0, 0, 0, 1))
        z = nn.functional.pad(z, (0, 0, 2, 2))
        z = torch.view_as_complex(z.contiguous())
        pad = hl // 2 * 3
        le = hl * int(math.ceil(length / hl)) + 2 * pad
        *other, freqs, frames = z.shape
        x = torch.istft(z.reshape(-1, freqs, frames), self.n_fft, hl, window=torch.hann_window(self.n_fft),
                        normalized=True, length=le, center=True)
        return x.view(*other, le)[..., pad: pad + length]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.spec(x)
        return self.ispec(z * self.gain, x.shape[-1])


def test_demucs_spectrogram_round_trip() -> None:
    model = DemucsSpec().eval()
    x = torch.randn(1, 2, 1000, generator=torch.Generator().manual_seed(1))
    result = check_export(model, (x,), targets=("tract",))
    assert result.reports["tract"].ok
    # other audio through the same artifact
    art = result.artifacts["tract"]
    other = torch.randn(1, 2, 1000) * 3
    with torch.no_grad():
        expected = model(other).numpy()
    assert art.check(inputs=[other.numpy()], expected=[expected]).ok
    assert np.isfinite(expected).all()
