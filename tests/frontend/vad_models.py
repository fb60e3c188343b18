"""Scripted streaming voice-activity detectors, built like the TorchScript models such
detectors ship as: an STFT magnitude front-end made of a convolution with a DFT basis,
a convolutional encoder, an LSTM cell over chunks and a sigmoid head. One keeps its
state in arguments; the other in module attributes it reassigns on every call (the
LSTM state, a context of past samples, the sample rate and batch size it last saw),
with an ``if`` on the sample rate and a reset on the first call."""

import math

import torch
from torch import nn

HIDDEN = 16


def dft_basis(n_fft: int) -> torch.Tensor:
    """Real and imaginary DFT rows of a Hann-windowed frame, as a conv1d filter."""
    bins = n_fft // 2 + 1
    n = torch.arange(n_fft, dtype=torch.float64)
    k = torch.arange(bins, dtype=torch.float64)[:, None]
    window = 0.5 - 0.5 * torch.cos(2 * math.pi * n / n_fft)
    re = torch.cos(2 * math.pi * k * n / n_fft) * window
    im = -torch.sin(2 * math.pi * k * n / n_fft) * window
    return torch.cat([re, im]).float().unsqueeze(1)


class STFTMagnitude(nn.Module):
    def __init__(self, n_fft: int, hop: int) -> None:
        super().__init__()
        self.bins = n_fft // 2 + 1
        self.hop = hop
        self.pad = n_fft // 4
        self.register_buffer("forward_basis_buffer", dft_basis(n_fft))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.pad(x.unsqueeze(1), (0, self.pad), mode="reflect")
        ft = nn.functional.conv1d(x, self.forward_basis_buffer, stride=self.hop)
        re, im = ft[:, : self.bins], ft[:, self.bins:]
        return torch.sqrt(re * re + im * im)


class Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTMCell(HIDDEN, HIDDEN)
        self.head = nn.Sequential(nn.Dropout(0.1), nn.ReLU(), nn.Conv1d(HIDDEN, 1, 1), nn.Sigmoid())

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h, c = self.rnn(x.mean(-1), (state[0], state[1]))
        return self.head(h.unsqueeze(-1)).squeeze(-1), torch.stack([h, c])


class VADCore(nn.Module):
    """Samples [B, T] and state [2, B, HIDDEN] → speech probability [B, 1] and new state."""

    def __init__(self, n_fft: int, hop: int) -> None:
        super().__init__()
        self.stft = STFTMagnitude(n_fft, hop)
        self.encoder = nn.Sequential(
            nn.Conv1d(n_fft // 2 + 1, HIDDEN, 3, padding=1), nn.ReLU(),
            nn.Conv1d(HIDDEN, HIDDEN, 3, stride=2, padding=1), nn.ReLU())
        self.decoder = Decoder()

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.decoder(self.encoder(self.stft(x)), state)


class ExplicitStateVAD(nn.Module):
    """State through arguments; an ``if`` on the sample rate; a loop over a fixed number
    of refinement layers."""

    layers: int

    def __init__(self) -> None:
        super().__init__()
        self.model_16k = VADCore(64, 32)
        self.model_8k = VADCore(32, 16)
        self.refine = nn.Linear(1, 1)
        self.layers = 3

    def forward(self, x: torch.Tensor, state: torch.Tensor, sr: int) -> tuple[torch.Tensor, torch.Tensor]:
        if sr != 16000 and sr % 16000 == 0:
            x = x[:, :: sr // 16000]
            sr = 16000
        if sr == 16000:
            out, state = self.model_16k(x, state)
        elif sr == 8000:
            out, state = self.model_8k(x, state)
        else:
            raise ValueError("unsupported sample rate")
        for _ in range(self.layers):
            out = torch.sigmoid(self.refine(out) + out)
        return out, state


class AttributeStateVAD(nn.Module):
    """State kept in attributes the forward reassigns; ``forward(chunk, sr)`` → probability."""

    sample_rates: list[int]
    hidden: int
    _last_sr: int
    _last_batch_size: int

    def __init__(self) -> None:
        super().__init__()
        self.sample_rates = [8000, 16000]
        self.hidden = HIDDEN
        self._model = VADCore(64, 32)
        self._model_8k = VADCore(32, 16)
        self._state = torch.zeros(0)
        self._context = torch.zeros(0)
        self._last_sr = 0
        self._last_batch_size = 0
        self.reset_states()

    @torch.jit.export
    def reset_states(self, batch_size: int = 1) -> None:
        self._state = torch.zeros(2, batch_size, self.hidden)
        self._context = torch.zeros(0)
        self._last_sr = 0
        self._last_batch_size = 0

    def forward(self, x: torch.Tensor, sr: int) -> torch.Tensor:
        if x.dim() == 1:
            x = x.unsqueeze(0)
        if x.dim() > 2:
            raise ValueError("too many dimensions for input audio chunk")
        if sr != 16000 and sr % 16000 == 0:
            x = x[:, :: sr // 16000]
            sr = 16000
        if sr not in self.sample_rates:
            raise ValueError("unsupported sample rate")
        num_samples = 256 if sr == 16000 else 128
        if x.shape[-1] != num_samples:
            raise ValueError("wrong chunk size")
        batch_size = x.shape[0]
        context_size = 32 if sr == 16000 else 16
        if not self._last_batch_size:
            self.reset_states(batch_size)
        if self._last_sr and self._last_sr != sr:
            self.reset_states(batch_size)
        if self._last_batch_size and self._last_batch_size != batch_size:
            self.reset_states(batch_size)
        if not len(self._context):
            self._context = torch.zeros(batch_size, context_size)
        x = torch.cat([self._context, x], dim=1)
        if sr == 16000:
            out, self._state = self._model(x, self._state)
        else:
            out, self._state = self._model_8k(x, self._state)
        self._context = x[..., -context_size:]
        self._last_sr = sr
        self._last_batch_size = batch_size
        return out


def scripted(cls: type[nn.Module]) -> torch.jit.ScriptModule:
    torch.manual_seed(0)
    return torch.jit.script(cls().eval())


class LoopAttributeState(nn.Module):
    """A recurrent state in an attribute, refined by a loop over a fixed number of
    layers that reassigns it, and reset by an ``if`` on a mode flag argument."""

    layers: int

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.Linear(2 * HIDDEN, HIDDEN)
        self.layers = 3
        self._h = torch.zeros(1, HIDDEN)

    def forward(self, x: torch.Tensor, reset: bool) -> torch.Tensor:
        if reset:
            self._h = torch.zeros_like(self._h)
        for _ in range(self.layers):
            self._h = torch.tanh(self.cell(torch.cat([self._h, x], dim=-1)))
        return self._h * 2.0


class RunningNorm(nn.Module):
    """A buffer updated in place on every call (a running mean of the input)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(HIDDEN))
        self.lin = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.mean.mul_(0.9).add_(0.1 * x.mean(0))
        return self.lin(x - self.mean)


class History(nn.Module):
    """Keeps a list of the batch sizes it saw: state t2n cannot carry between calls."""

    seen: list[int]

    def __init__(self) -> None:
        super().__init__()
        self.seen = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen = self.seen + [int(x.shape[0])]
        return x * 2.0
