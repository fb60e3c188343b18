"""File I/O under the archive writers: file-to-file copies of tensor regions, reads of
regions in pieces (both refusing a source that changed or ends early), and the calls
that make the disk write while t2n works (writeback kicks) and wait for it (fsync)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from t2n.errors import CorruptTensorFileError
from t2n.ir.tensor_data import FileRegion
from t2n.serialize.filecheck import check_stamp


def fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # e.g. platforms that cannot open folders
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


HAS_FADVISE = hasattr(os, "posix_fadvise") and hasattr(os, "POSIX_FADV_DONTNEED")


def start_writeback(f: BinaryIO, offset: int = 0, length: int = 0) -> bool:
    """Ask the disk to start writing ``length`` bytes of ``f`` from ``offset`` (0: to the
    end) without waiting for it: ``posix_fadvise(DONTNEED)`` starts the writeback of the
    dirty pages in the range. False where that call is missing or refused."""
    if not HAS_FADVISE:
        return False
    try:
        os.posix_fadvise(f.fileno(), offset, length, os.POSIX_FADV_DONTNEED)
    except OSError:
        return False
    return True


KICK_BYTES = 32 << 20
"""A synced tar asks the disk to start writing every this many bytes."""


class WritebackKick:
    """Starts the disk writing what was just written, without waiting for it.

    Linux keeps written data in memory until a tenth of the RAM is dirty (gigabytes), so
    a synced save would do all its disk work in the final fsync, after every byte has
    been copied into the page cache. ``posix_fadvise(DONTNEED)`` on each range just
    written starts its writeback at once (and lets the page cache drop what is already
    on disk), so the disk works while the rest is written and while ``t2n.export``
    compiles. Measured here on the 0.85 B Llama (interleaved A/B, 4 runs each, warm
    memory): a synced ``.tar`` save 4.23 → 3.07 s (f32), ``t2n.export`` 4.48 → 3.95 s
    (f32) and 1.29 → 1.17 s (f16). Only for synced writes (without ``sync`` nobody waits
    for the disk); does nothing where the call is missing, and the final fsync still
    guarantees durability.
    """

    def __init__(self, f: BinaryIO, usable: bool = True) -> None:
        self.f = f
        self.active = usable and HAS_FADVISE
        self.start = f.tell()

    def after_write(self) -> None:
        if not self.active:
            return
        end = self.f.tell()
        if end - self.start < KICK_BYTES:
            return
        self.f.flush()
        if not start_writeback(self.f, self.start, end - self.start):
            self.active = False
        self.start = end

    def moved_to(self, offset: int) -> None:
        self.start = min(self.start, offset)


REGION_STEP = 64 << 20
"""File-to-file copies go this many bytes at a time (a writeback kick may follow each)."""


def copy_region(region: FileRegion, f: BinaryIO, after_piece: Any = None) -> int:
    """Append the bytes of ``region`` to ``f`` at its position and return their count.

    ``os.copy_file_range`` copies them inside the kernel, from the source's page cache
    to the target's, with no buffer in this process (one copy of each byte instead of a
    read and a write); where it is missing or refused (another file system, an old
    kernel), what is left goes through :func:`read_region`. A source that ends early is
    refused.
    """
    f.flush()
    dst, start = f.fileno(), f.tell()
    done = 0
    if hasattr(os, "copy_file_range"):
        with open(region.path, "rb", buffering=0) as src, contextlib.suppress(OSError):
            while done < region.nbytes:
                _check_region(src.fileno(), region)
                n = os.copy_file_range(src.fileno(), dst, min(REGION_STEP, region.nbytes - done),
                                       region.offset + done, start + done)
                if n == 0:
                    raise _ends_early(region)
                done += n
                f.seek(start + done)
                if after_piece is not None:
                    after_piece()
    for piece in read_region(region, REGION_STEP, skip=done):
        f.write(piece)
        done += len(piece)
        if after_piece is not None:
            after_piece()
    return done


def read_region(region: FileRegion, step: int = 8 << 20, skip: int = 0) -> Iterator[bytes]:
    """The bytes of ``region`` after its first ``skip``, in pieces (for writers that
    transform them, e.g. gzip, or where the kernel will not copy)."""
    with open(region.path, "rb", buffering=0) as src:
        done = skip
        while done < region.nbytes:
            _check_region(src.fileno(), region)
            data = os.pread(src.fileno(), min(step, region.nbytes - done), region.offset + done)
            if not data:
                raise _ends_early(region)
            done += len(data)
            yield data


def _check_region(fd: int, region: FileRegion) -> None:
    """Refuse the source of ``region`` once it is not the file it was when opened."""
    check_stamp(fd, region.stamp, region.path, f"tensor {region.name!r}" if region.name else "")


def _ends_early(region: FileRegion) -> CorruptTensorFileError:
    tensor = f" (tensor {region.name!r})" if region.name else ""
    return CorruptTensorFileError(
        f"{region.path}{tensor}: ends before the {region.nbytes} bytes at offset {region.offset} (truncated?)")


def fsync_files(paths: Iterable[Path]) -> None:
    """Wait until every file in ``paths`` is on the disk."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
