"""Progress of long weight writes: a bar on a terminal, and log records either way.

The bar is drawn on ``stream`` (stderr by default) only when it is a terminal, at most
ten times a second, and erased at the end. The ``t2n`` logger gets an INFO record when
writing starts, one every ``log_every`` seconds while it lasts, and one at the end
with the throughput, whether or not a bar is shown.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from t2n.ir.tensor_data import chunk_nbytes

log = logging.getLogger("t2n")

BAR_MIN_BYTES = 64 << 20
"""Below this total no bar is drawn unless asked for (short writes need none)."""


def format_bytes(n: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"


class Progress:
    """Counts bytes written out of ``total``.

    ``bar``: ``True`` always draws, ``False`` never, ``None`` draws when ``stream`` is a
    terminal and ``total`` is at least :data:`BAR_MIN_BYTES`.
    """

    def __init__(
        self,
        total: int,
        label: str = "writing weights",
        *,
        bar: bool | None = None,
        stream: TextIO | None = None,
        log_every: float = 10.0,
        width: int = 30,
    ) -> None:
        self.total = max(0, int(total))
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self._auto = bar is None
        self.bar = self._decide() if bar is None else bar
        self.log_every = log_every
        self.width = width
        self.done = 0
        self.start = time.perf_counter()
        self._last_draw = 0.0
        self._last_log = self.start
        self._closed = False
        self._drawn = False
        log.info("%s: %s", label, format_bytes(self.total))

    def _decide(self) -> bool:
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty()) and self.total >= BAR_MIN_BYTES

    def set_total(self, total: int) -> None:
        """Change the total once it is known better (e.g. after a compile); with
        ``bar=None`` a bar appears if the new total is large enough."""
        self.total = max(0, int(total))
        if self._auto and not self.bar:
            self.bar = self._decide()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def update(self, n: int) -> None:
        self.done += n
        now = time.perf_counter()
        if self.bar and (now - self._last_draw >= 0.1 or self.done >= self.total):
            self._draw(now)
        if now - self._last_log >= self.log_every:
            self._last_log = now
            log.info("%s: %s", self.label, self._status(now))

    def _status(self, now: float) -> str:
        spent = max(now - self.start, 1e-9)
        rate = self.done / spent
        pct = 100.0 * self.done / self.total if self.total else 100.0
        eta = (self.total - self.done) / rate if rate > 0 and self.done < self.total else 0.0
        return (f"{pct:3.0f}% {format_bytes(self.done)}/{format_bytes(self.total)} "
                f"{format_bytes(rate)}/s ETA {eta:.0f}s")

    def _draw(self, now: float) -> None:
        self._last_draw = now
        frac = min(1.0, self.done / self.total) if self.total else 1.0
        filled = int(frac * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        self.stream.write(f"\rt2n: {self.label} |{bar}| {self._status(now)}  ")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        now = time.perf_counter()
        if self._drawn:
            self.stream.write("\r" + " " * (self.width + len(self.label) + 60) + "\r")
            self.stream.flush()
        spent = max(now - self.start, 1e-9)
        log.info("%s: %s in %.2f s (%s/s)", self.label, format_bytes(self.done), spent,
                 format_bytes(self.done / spent))

    def track(self, chunks: Iterable[Any]) -> Iterator[Any]:
        """Pass ``chunks`` (buffers) through, counting their bytes."""
        for c in chunks:
            yield c
            self.update(chunk_nbytes(c))

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["BAR_MIN_BYTES", "Progress", "format_bytes"]
