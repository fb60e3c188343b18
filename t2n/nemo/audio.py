"""Audio for a NeMo export: files read as float samples, and the lengths an export
accepts (the bounds its manifest states on the samples and the feature frames).

Every refusal is a :class:`~t2n.errors.NemoAudioError` naming the file (or "the audio")
and what to do, raised before tract runs.
"""

from __future__ import annotations

import math
import os
import re
import wave
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from t2n.errors import AudioLengthError, NemoAudioError
from t2n.ir.dims.expr import DimParseError, Sym
from t2n.ir.dims.parse import parse_dim

FILE_KINDS = ".wav (PCM, mono) or .npy (float samples)"
SHORT = "give longer audio, or pad it with silence as NeMo's transcribe() does"
LONGER = ("export the model again for longer audio (export_asr(..., max_audio_seconds=...), t2n nemo-asr "
          "--max-audio-seconds), or split the audio into pieces no longer than that")


def read_audio(path: str | os.PathLike[str], sample_rate: int) -> np.ndarray:
    """The samples ``[n]`` (f32 in [-1, 1]) of a PCM ``.wav`` file (8, 16, 24 or 32-bit,
    mono, at ``sample_rate``) or of a ``.npy`` array of float samples (``[n]``, ``[1, n]``
    or ``[n, 1]``)."""
    path = Path(path)
    if path.suffix.lower() == ".npy":
        try:
            data = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            raise NemoAudioError(str(path), f"cannot read it as a .npy array ({exc}); give a {FILE_KINDS} "
                                            "file") from exc
        return samples_of(data, str(path))
    try:
        with wave.open(str(path), "rb") as w:
            channels, width, rate, count = w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()
            data = w.readframes(count)
    except (wave.Error, EOFError, OSError) as exc:
        raise NemoAudioError(str(path), f"not a PCM .wav file ({exc}); give a {FILE_KINDS} file (e.g. "
                                        f"ffmpeg -i IN -ac 1 -ar {sample_rate} -c:a pcm_s16le OUT.wav)") from exc
    if channels != 1:
        raise NemoAudioError(str(path), f"{channels} channels; the model takes one: mix it down to mono (e.g. "
                                        f"ffmpeg -i IN -ac 1 OUT.wav)")
    if rate != sample_rate:
        raise NemoAudioError(str(path), f"sampled at {rate} Hz; the model takes {sample_rate} Hz: resample it "
                                        f"(e.g. ffmpeg -i IN -ar {sample_rate} OUT.wav)")
    if len(data) != count * width:
        raise NemoAudioError(str(path), f"truncated: its header says {count} samples, it holds "
                                        f"{len(data) // max(width, 1)}; copy or convert it again")
    return _pcm(data, width)


def _pcm(data: bytes, width: int) -> np.ndarray:
    if width == 1:
        return (np.frombuffer(data, np.uint8).astype(np.float32) - 128.0) / 128.0
    if width == 3:
        raw = np.frombuffer(data, np.uint8).reshape(-1, 3).astype(np.int32)
        values = raw[:, 0] | (raw[:, 1] << 8) | (raw[:, 2] << 16)
        return (np.where(values >= 1 << 23, values - (1 << 24), values) / float(1 << 23)).astype(np.float32)
    kind = {2: "<i2", 4: "<i4"}[width]
    return (np.frombuffer(data, kind).astype(np.float64) / float(1 << (8 * width - 1))).astype(np.float32)


def samples_of(audio: Any, source: str = "the audio") -> np.ndarray:
    """``audio`` as the f32 samples ``[n]`` of one channel: a 1-D array, or a 2-D one with
    one channel; float values (integer PCM must be scaled to [-1, 1] first)."""
    data = np.asarray(audio)
    if data.ndim == 2 and 1 in data.shape:
        data = data.reshape(-1)
    if data.ndim != 1:
        raise NemoAudioError(source, f"samples of shape {list(data.shape)}; the model takes one channel "
                                     "([n] samples): mix the channels down to mono")
    if not np.issubdtype(data.dtype, np.floating):
        raise NemoAudioError(source, f"{data.dtype} samples; give float samples in [-1, 1] (16-bit PCM divided "
                                     "by 32768)")
    return np.ascontiguousarray(data, dtype=np.float32)


# -- the lengths an export accepts ---------------------------------------------------------

_NEVER = 1 << 48
"""More samples than any audio holds (a century at 48 kHz is 2**47)."""

_BOUND = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|<|>|==)\s*(-?\d+)\s*$")


def _range(assertions: Any, symbol: str) -> tuple[int, int | None]:
    """The smallest and largest value (``None``: unbounded) that the artifact's
    ``assertions`` (``frames <= 40000``) allow ``symbol``, at least 1."""
    low, high = 1, None
    for text in assertions or ():
        m = _BOUND.match(str(text))
        if m is None or m.group(1) != symbol:
            continue
        op, value = m.group(2), int(m.group(3))
        if op in (">=", ">", "=="):
            low = max(low, value + (op == ">"))
        if op in ("<=", "<", "=="):
            bound = value - (op == "<")
            high = bound if high is None else min(high, bound)
    return low, high


def _last_symbol(entry: Mapping[str, Any], side: str, name: str) -> str | None:
    for info in entry.get(side, ()):
        if info.get("name") == name and info.get("shape") and isinstance(info["shape"][-1], str):
            return str(info["shape"][-1])
    return None


@attrs.frozen
class AudioLimits:
    """The lengths a NeMo export accepts, from its manifest: the feature frames its
    encoder's assertions allow (the longest audio it was exported for bounds them) and, with a
    preprocessor, the samples that give them (by its output shape, ``samples / 160``)."""

    sample_rate: int
    hop_length: int
    min_frames: int
    max_frames: int | None
    frames_of_samples: Sym | None = None
    samples_symbol: str = "samples"
    min_samples: int = 1
    max_samples: int | None = None

    @classmethod
    def from_manifest(cls, data: Mapping[str, Any]) -> AudioLimits:
        audio, artifacts = data.get("audio", {}), data.get("artifacts", {})
        encoder = artifacts.get("encoder", {})
        frames = _last_symbol(encoder, "inputs", "audio_signal")
        min_frames, max_frames = _range(encoder.get("assertions"), frames) if frames else (1, None)
        limits = cls(int(audio.get("sample_rate", 16000)), int(audio.get("hop_length", 0) or 0), min_frames,
                     max_frames)
        pre = artifacts.get("preprocessor")
        samples = _last_symbol(pre, "inputs", "input_signal") if pre else None
        out = next((o["shape"][-1] for o in (pre or {}).get("outputs", ()) if o.get("name") == "processed_signal"),
                   None)
        if pre is None or samples is None or not isinstance(out, str):
            return limits
        try:
            expr = parse_dim(out)
        except DimParseError:
            return limits
        if not isinstance(expr, Sym) or not expr.symbols() <= {samples, "B"}:
            return limits
        low, high = _range(pre.get("assertions"), samples)
        limits = attrs.evolve(limits, frames_of_samples=expr, samples_symbol=samples)
        frames_of = limits.frames_of
        # the fewest samples that give the fewest frames; the most that stay within the most
        lo, hi = low, max(low, 1)
        while frames_of(hi) < min_frames:
            lo, hi = hi, hi * 2
            if hi > _NEVER:  # frames that do not grow with the samples: no bound in samples
                return limits
        first = _first(lo, hi, lambda n: frames_of(n) >= min_frames)
        last = None
        if max_frames is not None:
            hi = max(first, 1)
            while frames_of(hi) <= max_frames:
                hi *= 2
                if hi > _NEVER:
                    return attrs.evolve(limits, min_samples=first)
            last = _first(first, hi, lambda n: frames_of(n) > max_frames) - 1
        if high is not None:
            last = high if last is None else min(last, high)
        return attrs.evolve(limits, min_samples=first, max_samples=last)

    def frames_of(self, samples: int) -> int:
        """The feature frames the preprocessor gives for ``samples``."""
        if self.frames_of_samples is None:
            return samples // max(self.hop_length, 1)
        return self.frames_of_samples.evaluate({self.samples_symbol: samples, "B": 1})

    def check_samples(self, samples: int, source: str = "the audio", *, advice: str = SHORT) -> None:
        """:class:`AudioLengthError` unless the export accepts ``samples`` samples
        (``advice``: what to do with shorter audio)."""
        rate = self.sample_rate
        seconds = samples / rate
        low, high = _down(self.min_samples / rate, up=True), self._seconds(self.max_samples)
        if samples < self.min_samples:
            held = "no samples: it is empty" if samples == 0 else f"{samples} samples at {rate} Hz"
            raise AudioLengthError(
                source, f"{_s(_down(seconds))} of audio ({held}), shorter than this "
                f"export accepts: at least {_s(low)} ({self.min_samples} samples, {self.min_frames} feature "
                f"frame(s)); {advice}",
                seconds=seconds, min_seconds=low, max_seconds=high)
        if self.max_samples is not None and samples > self.max_samples:
            raise AudioLengthError(
                source, f"{_s(_down(seconds, up=True))} of audio ({samples} samples at {rate} Hz), longer than this export "
                f"accepts: at most {_s(high or 0.0)} ({self.max_samples} samples; its encoder takes at most "
                f"{self.max_frames} feature frames, as its manifest states: the longest audio it was exported for); "
                f"{LONGER}", seconds=seconds, min_seconds=low,
                max_seconds=high)

    def check_frames(self, frames: int, source: str = "the features") -> None:
        """:class:`AudioLengthError` unless the encoder accepts ``frames`` feature frames."""
        per_frame = max(self.hop_length, 1) / self.sample_rate
        seconds = frames * per_frame
        low = _down(self.min_frames * per_frame, up=True)
        high = _down(self.max_frames * per_frame) if self.max_frames is not None else None
        if frames < self.min_frames or (self.max_frames is not None and frames > self.max_frames):
            which = f"at least {self.min_frames}" if frames < self.min_frames else f"at most {self.max_frames}"
            raise AudioLengthError(
                source, f"{frames} feature frames (about {_s(seconds)} of audio); this export's encoder takes "
                f"{which}, as its manifest states"
                + ("; give longer audio" if frames < self.min_frames else
                   f" (about {_s(high or 0.0)}: the longest audio it was exported for); {LONGER}"),
                seconds=seconds, min_seconds=low, max_seconds=high)

    def _seconds(self, samples: int | None) -> float | None:
        return None if samples is None else _down(samples / self.sample_rate)


def _first(lo: int, hi: int, ok: Any) -> int:
    """The smallest ``n`` in ``[lo, hi]`` with ``ok(n)`` (``ok`` false then true)."""
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _down(seconds: float, up: bool = False) -> float:
    """Seconds to the hundredth, rounded so that the bound it states holds."""
    return (math.ceil if up else math.floor)(seconds * 100 + (-1e-9 if up else 1e-9)) / 100


def _s(seconds: float) -> str:
    return f"{seconds:.2f} s"
