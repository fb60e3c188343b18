"""gzip streams for ``.tgz`` artifacts: ISA-L on several threads when the ``isal``
package is installed (``pip install t2n[fast]``), else zlib; both write standard gzip
(one member) with a fixed header, so the same model gives the same bytes.

On float weights ISA-L level 1 gives the same ratio as zlib level 6 (about 0.92 on
random f32) at 15-20x its speed on one core of this kind of machine; see
``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import os
import zlib
from typing import Any, BinaryIO, Protocol

from t2n.errors import InvalidArgumentError


class Compressor(Protocol):
    def compress(self, data: Any, /) -> bytes: ...
    def flush(self, mode: int = ..., /) -> bytes: ...


def isal_level(level: int) -> int:
    """The ISA-L level for a zlib-style ``level`` (1..9): 1..6 → 1, 7..8 → 2, 9 → 3.

    ISA-L level 0 is never used: on float weights its output is larger than its input.
    Levels 1 and 2 compress weights as well as zlib level 6; level 3 is about 4x slower
    for no gain on weights, so only ``9`` asks for it.
    """
    return 1 if level <= 6 else 2 if level <= 8 else 3


def gzip_threads() -> int:
    """Compression threads for ``.tgz``: the CPUs this process may use, at most 8."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(8, cpus))


def threaded_gzip(raw: BinaryIO, level: int) -> tuple[BinaryIO, str] | None:
    """A gzip writer over ``raw`` that compresses 1 MiB blocks on several threads with
    ISA-L (each block primed with the 32 KiB before it, as pigz does), or None when
    ``isal`` is not installed. Its bytes do not depend on the number of threads."""
    try:
        from isal import igzip_threaded  # type: ignore[import-not-found]
    except ImportError:
        return None
    lv, threads = isal_level(level), gzip_threads()
    opener: Any = igzip_threaded.open
    f: BinaryIO = opener(raw, "wb", compresslevel=lv, threads=threads)
    return f, f"isal level {lv}, {threads} thread{'s' if threads > 1 else ''}"


def gzip_compressor(level: int, prefer: str = "auto") -> tuple[Compressor, str]:
    """A single-stream gzip compressor (fixed header: mtime 0, no file name) and its name.

    ``prefer="auto"`` uses ISA-L when the ``isal`` package is installed (see the module
    docstring for why), otherwise zlib; ``"zlib"`` forces zlib. (``.tgz`` files use
    :func:`threaded_gzip` when ISA-L is there.)
    """
    if prefer not in ("auto", "zlib"):
        raise InvalidArgumentError(f"gzip compressor must be 'auto' or 'zlib', got {prefer!r}")
    if prefer == "auto":
        try:
            from isal import isal_zlib  # type: ignore[import-not-found]
        except ImportError:
            pass
        else:
            lv = isal_level(level)
            return isal_zlib.compressobj(lv, isal_zlib.DEFLATED, 31), f"isal level {lv}"
    return zlib.compressobj(level, zlib.DEFLATED, 31), f"zlib level {level}"
