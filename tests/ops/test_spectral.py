"""Spectral ops and complex tensors for audio front-ends: torch.fft, torch.stft, complex
arithmetic and shape ops, mel and log-mel spectrograms. Each runs in tract (tract's
own FFT and STFT operators) against PyTorch; Khronos NNEF refuses the Fourier
transforms by name, and runs the complex arithmetic that needs none."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import torch
from torch import nn

import t2n
from t2n.errors import NotExpressibleError, UnsupportedOpsError
from t2n.testing import check_export


class Fn(nn.Module):
    def __init__(self, fn: Callable[..., object]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: torch.Tensor) -> object:
        return self.fn(*args)


def real(z: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(z)


X = torch.randn(2, 3, 16, generator=torch.Generator().manual_seed(0))

FFT_CASES: dict[str, Callable[[torch.Tensor], object]] = {
    "fft": lambda x: real(torch.fft.fft(x)),
    "fft_dim_n_ortho": lambda x: real(torch.fft.fft(x, n=5, dim=1, norm="ortho")),
    "ifft_padded_forward": lambda x: real(torch.fft.ifft(torch.fft.fft(x), n=20, norm="forward")),
    "rfft": lambda x: real(torch.fft.rfft(x)),
    "rfft_odd_n": lambda x: real(torch.fft.rfft(x, n=15, norm="ortho")),
    "rfft_dim0": lambda x: real(torch.fft.rfft(x, dim=0)),
    "irfft_roundtrip": lambda x: torch.fft.irfft(torch.fft.rfft(x)),
    "irfft_odd_n": lambda x: torch.fft.irfft(torch.fft.rfft(x), n=15),
    "irfft_of_any_spectrum": lambda x: torch.fft.irfft(torch.view_as_complex(x.reshape(2, 3, 8, 2)), n=14),
    "fft_of_complex": lambda x: torch.fft.ifft(torch.fft.fft(x, dim=1), dim=1).real,
}


@pytest.mark.parametrize("case", list(FFT_CASES))
def test_fft_family(case: str) -> None:
    check_export(Fn(FFT_CASES[case]), (X,), khronos_refuses="fft")


COMPLEX_CASES: dict[str, Callable[[torch.Tensor], object]] = {
    "mul_div_add_sub_conj": lambda x: real(
        torch.fft.fft(x) * torch.fft.fft(x.flip(-1)) / (torch.fft.fft(x) + 2.0) - 1j * torch.fft.fft(x).conj()),
    "complex_times_real": lambda x: real(torch.fft.rfft(x) * x[..., :9] - x[..., 7:] / torch.fft.rfft(x).conj()),
    "abs_real_imag": lambda x: (torch.fft.fft(x).abs(), torch.fft.fft(x).real, torch.fft.fft(x).imag),
    "angle": lambda x: torch.angle(torch.fft.fft(x)[..., 1:8]),
    "shape_ops": lambda x: real(torch.cat([
        torch.fft.fft(x).transpose(0, 1).reshape(3, 32)[:, 1:5],
        torch.stack([torch.fft.fft(x)[0, :, 2:6].flip(-1)], 0).squeeze(0).permute(1, 0).permute(1, 0),
    ], -1).unsqueeze(0)),
    "sum_mean_select": lambda x: real(torch.fft.fft(x).sum(-1) + torch.fft.fft(x).mean(dim=-1, keepdim=True).squeeze(-1)
                                      + torch.fft.fft(x).select(2, 3) + torch.fft.fft(x).sum()),
}


@pytest.mark.parametrize("case", list(COMPLEX_CASES))
def test_complex_arithmetic_and_shapes(case: str) -> None:
    check_export(Fn(COMPLEX_CASES[case]), (X,), khronos_refuses="fft")


def test_complex_tensors_without_a_transform_run_in_khronos_too() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        z = torch.polar(x.abs() + 0.1, x) * torch.complex(x, 2 * x) + 1.5j
        w = torch.view_as_complex(torch.stack([x, x.flip(-1)], -1)).conj()
        return real(z / w), (z * w).abs(), z.imag

    check_export(Fn(fn), (X,))


class Spectrogram(nn.Module):
    """torch.stft with a window buffer; the output as (real, imaginary) pairs, or the power."""

    def __init__(self, power: bool = False, **kw: object) -> None:
        super().__init__()
        self.power = power
        self.kw = dict(kw)
        self.use_window = bool(self.kw.pop("use_window", True))
        self.register_buffer("window", torch.hann_window(int(self.kw.get("win_length", self.kw["n_fft"]))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        spec = torch.stft(x, window=self.window if self.use_window else None, **self.kw)
        if self.power:
            return spec.abs().pow(2)
        return real(spec) if self.kw.get("return_complex", True) else spec


STFT_CASES: dict[str, dict[str, object]] = {
    "center_reflect": dict(n_fft=64, hop_length=16, return_complex=True),
    "no_center": dict(n_fft=64, hop_length=16, center=False, return_complex=True),
    "short_window": dict(n_fft=64, hop_length=20, win_length=40, return_complex=True),
    "no_window": dict(n_fft=64, return_complex=True, use_window=False),
    "no_window_short": dict(n_fft=64, win_length=50, return_complex=True, use_window=False),
    "normalized_two_sided": dict(n_fft=32, hop_length=8, normalized=True, onesided=False, return_complex=True),
    "real_output": dict(n_fft=32, hop_length=8, return_complex=False),
    "constant_pad": dict(n_fft=32, hop_length=8, pad_mode="constant", return_complex=True),
}


@pytest.mark.parametrize("case", list(STFT_CASES))
def test_stft(case: str) -> None:
    signal = torch.randn(2, 400, generator=torch.Generator().manual_seed(1))
    check_export(Spectrogram(**STFT_CASES[case]), (signal,), khronos_refuses="stft")


def test_stft_of_one_signal_with_a_window_made_in_forward() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.stft(x, 64, 16, window=torch.hann_window(64), return_complex=True).abs()

    check_export(Fn(fn), (torch.randn(400),), khronos_refuses="stft")


def mel_filterbank(n_freqs: int, n_mels: int, sample_rate: int) -> torch.Tensor:
    """Triangular filters on the mel scale (HTK), [n_freqs, n_mels]."""
    def mel(f: np.ndarray) -> np.ndarray:
        return np.asarray(2595.0 * np.log10(1.0 + f / 700.0))

    freqs = np.linspace(0, sample_rate / 2, n_freqs)
    points = 700.0 * (10 ** (np.linspace(mel(np.zeros(1))[0], mel(np.array([sample_rate / 2]))[0],
                                         n_mels + 2) / 2595.0) - 1.0)
    lower, centre, upper = points[:-2, None], points[1:-1, None], points[2:, None]
    up = (freqs[None] - lower) / (centre - lower)
    down = (upper - freqs[None]) / (upper - centre)
    return torch.from_numpy(np.maximum(0, np.minimum(up, down)).T.astype(np.float32))


class LogMel(nn.Module):
    """A log-mel front-end as speech models compute it: pre-emphasis, STFT, power,
    mel filters, log, per-utterance normalization."""

    def __init__(self, n_fft: int = 128, hop: int = 32, n_mels: int = 20, sample_rate: int = 8000) -> None:
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        self.register_buffer("window", torch.hann_window(n_fft))
        self.register_buffer("mel", mel_filterbank(n_fft // 2 + 1, n_mels, sample_rate))

    def forward(self, audio: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        audio = torch.cat([audio[:, :1], audio[:, 1:] - 0.97 * audio[:, :-1]], dim=1)
        spec = torch.stft(audio, self.n_fft, self.hop, window=self.window, return_complex=True)
        power = spec.real.pow(2) + spec.imag.pow(2)
        mel = torch.matmul(power.transpose(1, 2), self.mel)
        log_mel = torch.log(torch.clamp(mel, min=1e-10))
        normalized = (log_mel - log_mel.mean(dim=1, keepdim=True)) / (log_mel.std(dim=1, keepdim=True) + 1e-5)
        return log_mel, normalized


def test_log_mel_front_end() -> None:
    audio = torch.randn(2, 1600, generator=torch.Generator().manual_seed(2))
    check_export(LogMel(), (audio,), khronos_refuses="stft")


@pytest.mark.parametrize("scripted", [False, True], ids=["traced", "scripted"])
def test_mel_spectrogram_with_a_dynamic_length(scripted: bool) -> None:
    model = LogMel().eval()
    model = torch.jit.script(model) if scripted else model
    audio = torch.randn(1, 1600, generator=torch.Generator().manual_seed(3))
    art = t2n.compile(model, (audio,), t2n.TractNNEF(), dynamic_axes={"input_0": {1: "T"}})
    for length in (1600, 977, 4000):
        x = torch.randn(1, length, generator=torch.Generator().manual_seed(length))
        with torch.no_grad():
            want = [o.numpy() for o in model(x)]  # type: ignore[union-attr]
        assert art.check(inputs=[x.numpy()], expected=want).ok


def test_power_spectrogram_matches_torch_stft_power() -> None:
    signal = torch.sin(torch.arange(800, dtype=torch.float32) * 2 * math.pi * 440 / 8000)[None]
    check_export(Spectrogram(power=True, n_fft=128, hop_length=32, return_complex=True), (signal,),
                 khronos_refuses="stft")


def test_what_cannot_be_exported_is_named() -> None:
    def complex_output(x: torch.Tensor) -> torch.Tensor:
        return torch.fft.fft(x)

    with pytest.raises(UnsupportedOpsError, match=r"complex tensor.*view_as_real"):
        t2n.compile(Fn(complex_output), (X,), t2n.TractNNEF())

    def exp_of_complex(x: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(torch.exp(torch.fft.fft(x)))

    with pytest.raises(UnsupportedOpsError, match=r"aten::exp on a complex tensor"):
        t2n.compile(Fn(exp_of_complex), (X,), t2n.TractNNEF())

    with pytest.raises(NotExpressibleError, match=r"fft.*Khronos NNEF has no Fourier transform"):
        t2n.compile(Fn(FFT_CASES["rfft"]), (X,), t2n.KhronosNNEF())


def test_complex_ops_applied_to_real_tensors() -> None:
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(4))
    x[0, 0], x[0, 1], x[1, 1] = float("nan"), 0.0, -2.0
    check_export(Fn(lambda x: (torch.angle(x), torch.real(x), x.conj() * 2)), (x,))
