"""Artifact containers: a directory, a ``.tar`` or a ``.tgz``, each written once.

Every form is written under a temporary name next to the destination and renamed
into place only when complete, so a failed or interrupted export (an exception, a
full disk, Ctrl-C) leaves nothing behind. Tar members are streamed straight into the
archive (no staging copy) with fixed metadata (mtime 0, uid/gid 0, no user names), so
the same model gives the same bytes on every run. ``sync=True`` flushes every file to
the disk (fsync) before the rename, so a completed save survives a crash.

``.tgz`` compression uses ISA-L (the ``isal`` package, ``pip install t2n[fast]``) when
installed, on one thread per CPU (at most 8), else zlib; both write standard gzip (one
member). On float weights ISA-L level 1 gives the same ratio as zlib level 6 (about
0.92 on random f32) at 15-20x its speed on one core of this kind of machine; see
``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import abc
import contextlib
import os
import shutil
import tarfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Protocol

from t2n.errors import (
    CorruptArchiveError,
    CorruptTensorFileError,
    InvalidArgumentError,
    SerializationError,
)
from t2n.ir.tensor_data import FileRegion, chunk_nbytes
from t2n.serialize.filecheck import check_stamp

BLOCK = 512


def artifact_form(path: str | os.PathLike[str], compression_level: int | None = None) -> tuple[str, int]:
    """Decide (form, level) from the path suffix, or from ``compression_level``.

    ``compression_level=None`` goes by suffix (``.tgz``/``.tar.gz`` → tgz at level 6,
    ``.tar`` → tar, anything else → directory); ``0`` forces an uncompressed tar and
    ``1..9`` a gzip-compressed tar at that level.
    """
    name = str(path)
    if compression_level is not None:
        if not 0 <= compression_level <= 9:
            raise InvalidArgumentError(f"compression_level must be None or 0..9, got {compression_level}")
        return ("tar", 0) if compression_level == 0 else ("tgz", compression_level)
    if name.endswith((".tgz", ".tar.gz")):
        return "tgz", 6
    if name.endswith(".tar"):
        return "tar", 0
    return "dir", 0


def check_member_name(name: str) -> str:
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts or not p.parts or name.startswith("./"):
        raise SerializationError(f"invalid member name {name!r}")
    return str(p)


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


class ArtifactWriter(abc.ABC):
    """Writes named members, then :meth:`commit` renames into place or :meth:`abort` cleans up."""

    def __init__(self, path: Path, sync: bool = False) -> None:
        self.path = path
        self.sync = sync
        self.bytes_written = 0
        self._done = False
        self.compressor_name = ""
        self._members = 0

    @abc.abstractmethod
    def add_stream(self, name: str, size: int, chunks: Iterable[Any]) -> None:
        """Add member ``name`` of exactly ``size`` bytes from buffer ``chunks``."""

    def add_bytes(self, name: str, data: bytes) -> None:
        self.add_stream(name, len(data), [data])

    @property
    def can_rollback(self) -> bool:
        """Whether :meth:`rollback` works: members can be taken back (not in a gzip stream)."""
        return False

    def mark(self) -> int:
        """A point to :meth:`rollback` to: the number of members added so far."""
        return self._members

    def rollback(self, mark: int) -> None:
        """Take back every member added after ``mark`` (as if never added)."""
        raise SerializationError(f"{type(self).__name__} cannot take members back")

    @abc.abstractmethod
    def _finish(self) -> None: ...

    @abc.abstractmethod
    def _cleanup(self) -> None: ...

    def commit(self) -> None:
        try:
            self._finish()
        except BaseException:
            self.abort()
            raise
        self._done = True

    def abort(self) -> None:
        if not self._done:
            self._done = True
            self._cleanup()

    def __enter__(self) -> ArtifactWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


def _tmp_name(path: Path) -> Path:
    return path.parent / f".{path.name}.t2n-tmp-{os.getpid()}-{id(path):x}"


def _replace(tmp: Path, path: Path, sync: bool = False) -> None:
    """Move ``tmp`` onto ``path``, replacing what was there only once ``tmp`` is complete."""
    if path.is_dir() and not path.is_symlink():
        old = path.parent / f".{path.name}.t2n-old-{os.getpid()}"
        os.replace(path, old)
        os.replace(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, path)
    if sync:
        _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
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


_HAS_FADVISE = hasattr(os, "posix_fadvise") and hasattr(os, "POSIX_FADV_DONTNEED")


def _start_writeback(f: BinaryIO, offset: int = 0, length: int = 0) -> bool:
    """Ask the disk to start writing ``length`` bytes of ``f`` from ``offset`` (0: to the
    end) without waiting for it: ``posix_fadvise(DONTNEED)`` starts the writeback of the
    dirty pages in the range. False where that call is missing or refused."""
    if not _HAS_FADVISE:
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
        self.active = usable and _HAS_FADVISE
        self.start = f.tell()

    def after_write(self) -> None:
        if not self.active:
            return
        end = self.f.tell()
        if end - self.start < KICK_BYTES:
            return
        self.f.flush()
        if not _start_writeback(self.f, self.start, end - self.start):
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


def _write_file(target: Path, name: str, size: int, chunks: Iterable[Any], sync: bool) -> int:
    """Write one member file. With ``sync``, its writeback is started now and waited for
    by :func:`_fsync_files` at commit: an fsync after each file would leave the disk idle
    while the next one is written (2-3x slower for a model's worth of files here)."""
    n = 0
    with open(target, "wb") as f:
        for c in chunks:
            n += copy_region(c, f) if isinstance(c, FileRegion) else f.write(c)
        if n != size:
            raise SerializationError(f"{name}: wrote {n} bytes, expected {size}")
        if sync:
            f.flush()
            if not _start_writeback(f):
                os.fsync(f.fileno())  # cannot start it early: wait for it now
    return n


def _fsync_files(paths: Iterable[Path]) -> None:
    """Wait until every file in ``paths`` is on the disk."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class DirWriter(ArtifactWriter):
    """A new folder, built under a temporary name and renamed into place (replacing a
    previous artifact of the same name only when complete)."""

    def __init__(self, path: Path, sync: bool = False) -> None:
        super().__init__(path, sync)
        self._tmp = _tmp_name(path)
        shutil.rmtree(self._tmp, ignore_errors=True)
        self._tmp.mkdir(parents=True)
        self._folders: set[Path] = {self._tmp}
        self._files: list[tuple[Path, int]] = []

    def add_stream(self, name: str, size: int, chunks: Iterable[Any]) -> None:
        target = self._tmp / check_member_name(name)
        if target.parent not in self._folders:
            target.parent.mkdir(parents=True, exist_ok=True)
            self._folders.add(target.parent)
        self._files.append((target, size))  # before writing: a partial file is taken back too
        self._members += 1
        self.bytes_written += _write_file(target, name, size, chunks, self.sync)

    @property
    def can_rollback(self) -> bool:
        return True

    def rollback(self, mark: int) -> None:
        for target, _ in self._files[mark:]:
            target.unlink(missing_ok=True)
        del self._files[mark:]
        self._members = len(self._files)
        self.bytes_written = sum(size for _, size in self._files)

    def _finish(self) -> None:
        if self.sync:
            _fsync_files(target for target, _ in self._files)
            for folder in self._folders:
                _fsync_dir(folder)
        _replace(self._tmp, self.path, self.sync)

    def _cleanup(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)


class IntoDirWriter(ArtifactWriter):
    """Members added to a folder that may already hold other files (tensor exports).

    Each member is written to a hidden temporary file beside its final name; all are
    renamed into place at :meth:`commit` (replacing files of the same name), and all
    are deleted on :meth:`abort`, together with the folder if this writer created it.
    """

    def __init__(self, path: Path, sync: bool = False) -> None:
        super().__init__(path, sync)
        self._created = not path.exists()
        path.mkdir(parents=True, exist_ok=True)
        self._pending: list[tuple[Path, Path]] = []
        self._made: list[Path] = []

    def add_stream(self, name: str, size: int, chunks: Iterable[Any]) -> None:
        final = self.path / check_member_name(name)
        if any(f == final for _, f in self._pending):
            raise SerializationError(f"member {name!r} added twice")
        folder = final.parent
        missing = []
        while folder != self.path and not folder.exists():
            missing.append(folder)
            folder = folder.parent
        for m in reversed(missing):
            m.mkdir()
            self._made.append(m)
        tmp = final.parent / f".{final.name}.t2n-tmp-{os.getpid()}"
        self._pending.append((tmp, final))
        self.bytes_written += _write_file(tmp, name, size, chunks, self.sync)

    def _finish(self) -> None:
        if self.sync:
            _fsync_files(tmp for tmp, _ in self._pending)
        for tmp, final in self._pending:
            os.replace(tmp, final)
        if self.sync:
            for folder in {final.parent for _, final in self._pending}:
                _fsync_dir(folder)

    def _cleanup(self) -> None:
        for tmp, _ in self._pending:
            tmp.unlink(missing_ok=True)
        for folder in reversed(self._made):
            shutil.rmtree(folder, ignore_errors=True)
        if self._created:
            shutil.rmtree(self.path, ignore_errors=True)


class TarWriter(ArtifactWriter):
    """A tar stream, optionally gzip-compressed on the fly, into a temporary file."""

    def __init__(self, path: Path, level: int = 0, sync: bool = False, compressor: str = "auto") -> None:
        super().__init__(path, sync)
        self._tmp = _tmp_name(path)
        self._z: Compressor | None = None
        if level and compressor not in ("auto", "zlib"):
            raise InvalidArgumentError(f"gzip compressor must be 'auto' or 'zlib', got {compressor!r}")
        self._raw: BinaryIO = open(self._tmp, "wb")  # noqa: SIM115 - closed in finish/cleanup
        self._file: BinaryIO = self._raw
        self._starts: list[tuple[int, int]] = []  # (offset, size) of each member (no gzip)
        self._kick = WritebackKick(self._raw, sync and not level)  # gzip threads write to _raw themselves
        if level:
            threaded = threaded_gzip(self._raw, level) if compressor == "auto" else None
            if threaded is not None:
                self._file, self.compressor_name = threaded
            else:
                self._z, self.compressor_name = gzip_compressor(level, compressor)

    def _write(self, data: Any) -> None:
        if isinstance(data, FileRegion):
            if self.can_rollback:  # a plain tar: straight from file to file
                copy_region(data, self._raw, self._kick.after_write)
            else:
                for piece in read_region(data):
                    self._write(piece)
            return
        if self._z is not None:
            out = self._z.compress(data)
            if out:
                self._raw.write(out)
        else:
            self._file.write(data)
        self._kick.after_write()

    def add_stream(self, name: str, size: int, chunks: Iterable[Any]) -> None:
        if self.can_rollback:
            self._starts.append((self._raw.tell(), size))
        self._members += 1
        info = tarfile.TarInfo(check_member_name(name))
        info.size = size
        info.mtime = 0
        info.mode = 0o644
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        self._write(info.tobuf(format=tarfile.PAX_FORMAT))
        n = 0
        for c in chunks:
            self._write(c)
            n += chunk_nbytes(c)
        if n != size:
            raise SerializationError(f"{name}: streamed {n} bytes, expected {size}")
        pad = (-size) % BLOCK
        if pad:
            self._write(bytes(pad))
        self.bytes_written += size

    @property
    def can_rollback(self) -> bool:
        return self._z is None and self._file is self._raw

    def rollback(self, mark: int) -> None:
        """Cut the archive back to where member ``mark`` began (tar members are sequential)."""
        if not self.can_rollback:
            raise SerializationError("members cannot be taken back from a compressed archive")
        if mark >= len(self._starts):
            return
        offset = self._starts[mark][0]
        del self._starts[mark:]
        self._members = mark
        self.bytes_written = sum(size for _, size in self._starts)
        self._raw.flush()
        self._raw.seek(offset)
        self._raw.truncate()
        self._kick.moved_to(offset)

    def _finish(self) -> None:
        self._write(bytes(2 * BLOCK))
        if self._z is not None:
            self._raw.write(self._z.flush())
        if self._file is not self._raw:
            self._file.close()  # ends the threaded gzip stream; leaves the file open
        if self.sync:
            self._raw.flush()
            os.fsync(self._raw.fileno())
        self._raw.close()
        _replace(self._tmp, self.path, self.sync)

    def _cleanup(self) -> None:
        try:
            if self._file is not self._raw:
                with contextlib.suppress(Exception):  # a failed stream may fail to close
                    self._file.close()
            self._raw.close()
        finally:
            self._tmp.unlink(missing_ok=True)


def open_writer(
    path: str | os.PathLike[str],
    compression_level: int | None = None,
    *,
    sync: bool = False,
    compressor: str = "auto",
) -> ArtifactWriter:
    """A writer for ``path`` in the form its suffix (or ``compression_level``) selects.

    ``sync=True`` fsyncs every file before it is renamed into place; ``compressor``
    (``"auto"`` or ``"zlib"``) picks the gzip implementation of ``.tgz``.
    """
    p = Path(path)
    form, level = artifact_form(p, compression_level)
    if not p.parent.exists():
        raise InvalidArgumentError(f"folder {p.parent} does not exist")
    if form == "dir":
        return DirWriter(p, sync)
    return TarWriter(p, level if form == "tgz" else 0, sync, compressor)


# -- reading ------------------------------------------------------------------------


def read_artifact(path: str | os.PathLike[str]) -> dict[str, bytes]:
    """All members of an artifact (dir, tar or tgz) by name, validated."""
    p = Path(path)
    if p.is_dir():
        out: dict[str, bytes] = {}
        for f in sorted(p.rglob("*")):
            if f.is_symlink():
                raise CorruptArchiveError(f"{p}: {f.relative_to(p)} is a link")
            if f.is_file():
                out[f.relative_to(p).as_posix()] = f.read_bytes()
        return out
    return dict(iter_tar_members(p))


def iter_tar_members(path: Path) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of each file in a tar/tgz artifact, refusing members that escape the
    folder, links, special files, truncated members and names given twice (tar keeps
    both, and which one a reader takes is up to the reader)."""
    seen: set[str] = set()
    try:
        with tarfile.open(path, "r:*") as tar:
            for m in tar:
                name = m.name[2:] if m.name.startswith("./") else m.name
                pp = PurePosixPath(name)
                if pp.is_absolute() or ".." in pp.parts:
                    raise CorruptArchiveError(f"{path}: member {m.name!r} escapes the archive folder")
                if m.issym() or m.islnk():
                    raise CorruptArchiveError(f"{path}: member {m.name!r} is a link")
                if m.isdir():
                    continue
                if not m.isfile():
                    raise CorruptArchiveError(f"{path}: member {m.name!r} is not a regular file")
                key = pp.as_posix()
                if key in seen:
                    raise CorruptArchiveError(
                        f"{path}: member {m.name!r} appears twice (which copy is meant is ambiguous); "
                        "write the artifact again")
                seen.add(key)
                f = tar.extractfile(m)
                assert f is not None
                data = f.read()
                if len(data) != m.size:
                    raise CorruptArchiveError(f"{path}: member {m.name!r} is truncated")
                yield name, data
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise CorruptArchiveError(f"{path}: unreadable archive: {exc}") from exc


__all__ = [
    "ArtifactWriter", "DirWriter", "IntoDirWriter", "TarWriter", "artifact_form", "gzip_compressor",
    "gzip_threads", "isal_level", "iter_tar_members", "open_writer", "read_artifact", "threaded_gzip",
]
