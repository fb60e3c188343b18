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

``.tgz`` compression: :mod:`t2n.serialize.gzip_stream`; file-to-file copies, writeback
and fsync: :mod:`t2n.serialize.region_io`; reading artifacts back:
:mod:`t2n.serialize.archive_read` (its names are also importable from here).
"""

from __future__ import annotations

import abc
import contextlib
import functools
import logging
import os
import shutil
import tarfile
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from t2n.errors import (
    InvalidArgumentError,
    SerializationError,
)
from t2n.ir.tensor_data import FileRegion, chunk_nbytes
from t2n.serialize import signals
from t2n.serialize.archive_read import iter_tar_members, read_artifact
from t2n.serialize.destination import check_destination, check_member_target, prepare_destination
from t2n.serialize.gzip_stream import (
    Compressor,
    gzip_compressor,
    gzip_threads,
    isal_level,
    threaded_gzip,
)
from t2n.serialize.region_io import (
    WritebackKick,
    copy_region,
    fsync_dir,
    fsync_files,
    read_region,
    start_writeback,
)
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
        fsync_dir(path.parent)


def _write_file(f: BinaryIO, name: str, size: int, chunks: Iterable[Any], sync: bool) -> int:
    """Write one member file into ``f``. With ``sync``, its writeback is started now and
    waited for by :func:`fsync_files` at commit: an fsync after each file would leave the
    disk idle while the next one is written (2-3x slower for a model's worth of files here)."""
    n = 0
    for c in chunks:
        n += copy_region(c, f) if isinstance(c, FileRegion) else f.write(c)
    if n != size:
        raise SerializationError(f"{name}: wrote {n} bytes, expected {size}")
    if sync:
        f.flush()
        if not start_writeback(f):
            os.fsync(f.fileno())  # cannot start it early: wait for it now
    return n


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
            fsync_files(target for target, _ in self._files)
            for folder in self._folders:
                fsync_dir(folder)
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
            fsync_files(tmp for tmp, _ in self._pending)
        with signals.held():
            for tmp, final in self._pending:
                check_member_target(final)
                os.replace(tmp, final)
        if self.sync:
            for folder in {final.parent for _, final in self._pending}:
                fsync_dir(folder)

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


__all__ = [
    "ArtifactWriter", "DirWriter", "IntoDirWriter", "TarWriter", "artifact_form", "gzip_compressor",
    "gzip_threads", "isal_level", "iter_tar_members", "open_writer", "read_artifact", "threaded_gzip",
]
