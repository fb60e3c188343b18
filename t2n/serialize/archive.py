"""Artifact containers: a directory, a ``.tar`` or a ``.tgz``, each written once.

Every form is written under a temporary name next to the destination and renamed
into place only when complete, so a failed or interrupted export (an exception, a
full disk, Ctrl-C) leaves nothing behind. Tar members are streamed straight into the
archive (no staging copy) with fixed metadata (mtime 0, uid/gid 0, no user names), so
the same model gives the same bytes on every run. ``sync=True`` flushes every file to
the disk (fsync) before the rename, so a completed save survives a crash.

What is at the destination is replaced only if t2n wrote it, unless ``overwrite=True``
(:mod:`t2n.serialize.destination`); temporary names, the removal of what crashed saves
left and the final move: :mod:`t2n.serialize.staging`; SIGTERM is handled like Ctrl-C
(:mod:`t2n.serialize.signals`); a full disk, a read-only folder or a name too long
raise ``ArtifactWriteError`` (:mod:`t2n.serialize.write_faults`).

``.tgz`` compression uses ISA-L (the ``isal`` package, ``pip install t2n[fast]``) when
installed, on one thread per CPU (at most 8), else zlib; both write standard gzip (one
member). On float weights ISA-L level 1 gives the same ratio as zlib level 6 (about
0.92 on random f32) at 15-20x its speed on one core of this kind of machine; see
``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import logging
import os
import shutil
import tarfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Protocol

from t2n.errors import (
    CorruptArchiveError,
    CorruptTensorFileError,
    InvalidArgumentError,
    SerializationError,
)
from t2n.ir.tensor_data import FileRegion, chunk_nbytes
from t2n.serialize import signals
from t2n.serialize.destination import check_destination, check_member_target, prepare_destination
from t2n.serialize.filecheck import check_stamp
from t2n.serialize.staging import (
    find_stale_temps,
    install,
    make_folders,
    new_temp_dir,
    new_temp_file,
    remove_if_empty,
    remove_paths,
    temp_stem,
)
from t2n.serialize.write_faults import SourceChunks, mapped_faults, run_cleanup

log = logging.getLogger("t2n")

BLOCK = 512


def artifact_form(path: str | os.PathLike[str], compression_level: int | None = None) -> tuple[str, int]:
    """Decide (form, level) from the path suffix, or from ``compression_level``.

    ``compression_level=None`` goes by suffix: ``.tgz``/``.tar.gz`` → tgz at level 6,
    ``.tar`` → tar, no suffix or ``.nnef`` → directory. Any other suffix made of letters
    (``model.zip``, ``model.onnx``, ``model.nnef.gz``, ``model.tar.bz2``) is refused
    rather than written as a directory of that name. ``0`` forces an uncompressed tar
    and ``1..9`` a gzip-compressed tar at that level, whatever the suffix.
    """
    name = str(path)
    if compression_level is not None:
        if not isinstance(compression_level, int) or isinstance(compression_level, bool) or \
                not 0 <= compression_level <= 9:
            raise InvalidArgumentError(
                f"compression_level must be None (form chosen by suffix), 0 (.tar) or an int "
                f"1..9 (.tgz at that level), got {type(compression_level).__name__} {compression_level!r}"
            )
        return ("tar", 0) if compression_level == 0 else ("tgz", compression_level)
    if name.endswith((".tgz", ".tar.gz")):
        return "tgz", 6
    if name.endswith(".tar"):
        return "tar", 0
    suffix = Path(name).suffix.lower()
    if suffix != ".nnef" and (suffix[1:].isalpha() or suffix in (".bz2", ".lz4", ".7z", ".tbz2")):
        raise InvalidArgumentError(
            f"cannot tell what to write at {name!r}: its suffix {suffix!r} is not an artifact "
            "form. A directory has no suffix or ends in '.nnef', an uncompressed archive "
            "ends in '.tar', a gzip-compressed one in '.tgz' or '.tar.gz' (or pass "
            "compression_level=0..9 to write a tar / tgz under this name)"
        )
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
    """Writes named members, then :meth:`commit` moves them into place or :meth:`abort`
    removes every temporary file.

    A file-system fault while writing (full disk, read-only folder, name too long)
    raises :class:`~t2n.errors.ArtifactWriteError` (:mod:`t2n.serialize.write_faults`);
    SIGTERM while a writer is open in the main thread is handled like Ctrl-C
    (:mod:`t2n.serialize.signals`).
    """

    def __init__(self, path: Path, sync: bool = False) -> None:
        self.path = path
        self.sync = sync
        self.bytes_written = 0
        self._done = False
        self.compressor_name = ""
        self._members = 0
        self._roots: list[Path] = [path]
        """Where this writer's own files are: OSErrors about them are write faults."""
        self._counted = signals.writer_opened()

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
    def _cleanup(self) -> None:
        """Remove every temporary file (through :func:`run_cleanup`: never raises OSError)."""

    def _faults(self, doing: str, source: SourceChunks | None = None) -> contextlib.AbstractContextManager[None]:
        return mapped_faults(self.path, doing, self._roots, source)

    def commit(self) -> None:
        try:
            with self._faults("finishing it and moving it into place"):
                self._finish()
        except BaseException:
            self.abort()
            raise
        self._done = True
        self._release()

    def abort(self) -> None:
        """Remove the temporary files; the error in flight stays the one raised."""
        if self._done:
            return
        self._done = True
        try:
            with signals.held():
                self._cleanup()
        finally:
            self._release()

    def _release(self) -> None:
        if self._counted:
            self._counted = False
            signals.writer_closed()

    def __enter__(self) -> ArtifactWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


def _install(tmp: Path, path: Path, overwrite: bool, sync: bool = False) -> None:
    """Move the complete ``tmp`` onto ``path`` (see :func:`staging.install`), with
    SIGTERM and Ctrl-C held back until it is done."""
    with signals.held():
        install(tmp, path, lambda: check_destination(path, overwrite))
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


def _write_file(f: BinaryIO, name: str, size: int, chunks: Iterable[Any], sync: bool) -> int:
    """Write one member file into ``f``. With ``sync``, its writeback is started now and
    waited for by :func:`_fsync_files` at commit: an fsync after each file would leave the
    disk idle while the next one is written (2-3x slower for a model's worth of files here)."""
    n = 0
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
    """A new folder, built under a unique temporary name and moved into place when
    complete, replacing what was there only if t2n wrote it (or ``overwrite``; see
    :mod:`t2n.serialize.destination`)."""

    def __init__(self, path: Path, sync: bool = False, *, overwrite: bool = False) -> None:
        super().__init__(path, sync)
        self.overwrite = overwrite
        self._folders: set[Path] = set()
        self._files: list[tuple[Path, int]] = []
        try:
            with mapped_faults(path, "creating a temporary folder beside it", [path.parent]):
                prepare_destination(path, overwrite)
                self._tmp = new_temp_dir(path.parent, path.name)
        except BaseException:
            self._release()
            raise
        self._folders.add(self._tmp)
        self._roots.append(self._tmp)

    def add_stream(self, name: str, size: int, chunks: Iterable[Any]) -> None:
        target = self._tmp / check_member_name(name)
        source = SourceChunks(chunks)
        with self._faults(f"writing {name}", source):
            if target.parent not in self._folders:
                target.parent.mkdir(parents=True, exist_ok=True)
                self._folders.add(target.parent)
            self._files.append((target, size))  # before writing: a partial file is taken back too
            self._members += 1
            with open(target, "wb") as f:
                self.bytes_written += _write_file(f, name, size, source, self.sync)

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
        _install(self._tmp, self.path, self.overwrite, self.sync)

    def _cleanup(self) -> None:
        run_cleanup([functools.partial(shutil.rmtree, self._tmp)], str(self.path))


class IntoDirWriter(ArtifactWriter):
    """Members added to a folder that may already hold other files (tensor exports).

    Each member is written to a hidden temporary file beside its final name; all are
    moved into place at :meth:`commit`. Only regular ``.dat`` files of the same names
    are replaced; any other entry in the way is refused before anything is written
    (see :mod:`t2n.serialize.destination`). :meth:`abort` deletes this writer's
    temporary files and the folders it created if they are empty again: never a file
    it did not write, even one another process put there meanwhile.
    """

    def __init__(self, path: Path, sync: bool = False) -> None:
        super().__init__(path, sync)
        self._pending: list[tuple[Path, Path]] = []
        self._made: list[Path] = []
        self._stale: dict[Path, dict[str, list[Path]]] = {}
        try:
            with self._faults("creating the folder"):
                self._made += make_folders(path)
        except BaseException:
            self.abort()
            raise

    def _remove_stale(self, final: Path) -> None:
        """Leftovers of crashed writes of ``final``, found with one listing per folder."""
        stale = self._stale.get(final.parent)
        if stale is None:
            stale = self._stale[final.parent] = find_stale_temps(final.parent)
        remove_paths(stale.pop(temp_stem(final.name), []))

    def add_stream(self, name: str, size: int, chunks: Iterable[Any]) -> None:
        final = self.path / check_member_name(name)
        if any(f == final for _, f in self._pending):
            raise SerializationError(f"member {name!r} added twice")
        source = SourceChunks(chunks)
        with self._faults(f"writing {name}", source):
            self._made += make_folders(final.parent)
            check_member_target(final)
            self._remove_stale(final)
            tmp, f = new_temp_file(final.parent, final.name)
            self._pending.append((tmp, final))
            with f:
                self.bytes_written += _write_file(f, name, size, source, self.sync)

    def _finish(self) -> None:
        if self.sync:
            _fsync_files(tmp for tmp, _ in self._pending)
        with signals.held():
            for tmp, final in self._pending:
                check_member_target(final)
                os.replace(tmp, final)
        if self.sync:
            for folder in {final.parent for _, final in self._pending}:
                _fsync_dir(folder)

    def _cleanup(self) -> None:
        steps: list[Callable[[], object]] = [
            functools.partial(tmp.unlink, missing_ok=True) for tmp, _ in self._pending]
        steps += [functools.partial(remove_if_empty, m) for m in reversed(self._made)]
        run_cleanup(steps, str(self.path))


class TarWriter(ArtifactWriter):
    """A tar stream, optionally gzip-compressed on the fly, into a unique temporary file
    moved into place when complete (replacing only what t2n wrote, or ``overwrite``)."""

    def __init__(self, path: Path, level: int = 0, sync: bool = False, compressor: str = "auto",
                 *, overwrite: bool = False) -> None:
        super().__init__(path, sync)
        self.overwrite = overwrite
        self._z: Compressor | None = None
        try:
            if level and compressor not in ("auto", "zlib"):
                raise InvalidArgumentError(f"gzip compressor must be 'auto' or 'zlib', got {compressor!r}")
            with mapped_faults(path, "creating a temporary file beside it", [path.parent]):
                prepare_destination(path, overwrite)
                self._tmp, self._raw = new_temp_file(path.parent, path.name)
        except BaseException:
            self._release()
            raise
        self._roots.append(self._tmp)
        self._file: BinaryIO = self._raw
        self._starts: list[tuple[int, int]] = []  # (offset, size) of each member (no gzip)
        self._kick = WritebackKick(self._raw, sync and not level)  # gzip threads write to _raw themselves
        if level:
            try:
                threaded = threaded_gzip(self._raw, level) if compressor == "auto" else None
            except BaseException:
                self.abort()
                raise
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
        info = tarfile.TarInfo(check_member_name(name))
        source = SourceChunks(chunks)
        with self._faults(f"writing {name}", source):
            if self.can_rollback:
                self._starts.append((self._raw.tell(), size))
            self._members += 1
            info.size = size
            info.mtime = 0
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            self._write(info.tobuf(format=tarfile.PAX_FORMAT))
            n = 0
            for c in source:
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
        _install(self._tmp, self.path, self.overwrite, self.sync)

    def _close_stream(self) -> None:
        try:
            self._file.close()
        except Exception as exc:  # a gzip stream that failed may fail again on closing
            log.debug("closing the failed gzip stream of %s: %s", self.path, exc)

    def _cleanup(self) -> None:
        steps: list[Callable[[], object]] = [self._close_stream] if self._file is not self._raw else []
        steps += [self._raw.close, functools.partial(self._tmp.unlink, missing_ok=True)]
        run_cleanup(steps, str(self.path))


def open_writer(
    path: str | os.PathLike[str],
    compression_level: int | None = None,
    *,
    sync: bool = False,
    compressor: str = "auto",
    overwrite: bool = False,
) -> ArtifactWriter:
    """A writer for ``path`` in the form its suffix (or ``compression_level``) selects.

    ``sync=True`` fsyncs every file before it is renamed into place; ``compressor``
    (``"auto"`` or ``"zlib"``) picks the gzip implementation of ``.tgz``. What is at
    ``path`` is replaced only if t2n wrote it, unless ``overwrite=True`` (see
    :mod:`t2n.serialize.destination`).
    """
    p = Path(path)
    form, level = artifact_form(p, compression_level)
    if not p.parent.exists():
        raise InvalidArgumentError(f"folder {p.parent} does not exist")
    if form == "dir":
        return DirWriter(p, sync, overwrite=overwrite)
    return TarWriter(p, level if form == "tgz" else 0, sync, compressor, overwrite=overwrite)


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
