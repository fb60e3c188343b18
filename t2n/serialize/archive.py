"""Artifact containers: a directory, a ``.tar`` or a ``.tgz``, each written once.

Every form is written under a temporary name next to the destination and renamed
into place only when complete, so a failed or interrupted export leaves nothing
behind. Tar members are streamed straight into the archive (no staging copy) with
fixed metadata (mtime 0, uid/gid 0, no user names), so the same model gives the same
bytes on every run.
"""

from __future__ import annotations

import abc
import os
import shutil
import tarfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Protocol

from t2n.errors import CorruptArchiveError, InvalidArgumentError, SerializationError

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


def gzip_compressor(level: int) -> tuple[Compressor, str]:
    """A gzip stream compressor (fixed header: mtime 0, no file name).

    Uses ISA-L (``isal``) when installed, which is several times faster than zlib on
    this kind of machine for the same format; otherwise zlib.
    """
    try:
        from isal import isal_zlib  # type: ignore[import-not-found]

        isal_level = min(3, max(0, (level * 4) // 10))
        return isal_zlib.compressobj(isal_level, isal_zlib.DEFLATED, 31), f"isal level {isal_level}"
    except ImportError:
        return zlib.compressobj(level, zlib.DEFLATED, 31), f"zlib level {level}"


class ArtifactWriter(abc.ABC):
    """Writes named members, then :meth:`commit` renames into place or :meth:`abort` cleans up."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.bytes_written = 0
        self._done = False
        self.compressor_name = ""

    @abc.abstractmethod
    def add_stream(self, name: str, size: int, chunks: Iterable[Any]) -> None:
        """Add member ``name`` of exactly ``size`` bytes from buffer ``chunks``."""

    def add_bytes(self, name: str, data: bytes) -> None:
        self.add_stream(name, len(data), [data])

    @abc.abstractmethod
    def _finish(self) -> None: ...

    @abc.abstractmethod
    def _cleanup(self) -> None: ...

    def commit(self) -> None:
        self._finish()
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


def _replace(tmp: Path, path: Path) -> None:
    """Move ``tmp`` onto ``path``, replacing what was there only once ``tmp`` is complete."""
    if path.is_dir() and not path.is_symlink():
        old = path.parent / f".{path.name}.t2n-old-{os.getpid()}"
        os.replace(path, old)
        os.replace(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, path)


class DirWriter(ArtifactWriter):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._tmp = _tmp_name(path)
        shutil.rmtree(self._tmp, ignore_errors=True)
        self._tmp.mkdir(parents=True)

    def add_stream(self, name: str, size: int, chunks: Iterable[Any]) -> None:
        target = self._tmp / check_member_name(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        n = 0
        with open(target, "wb") as f:
            for c in chunks:
                n += f.write(c)
        if n != size:
            raise SerializationError(f"{name}: wrote {n} bytes, expected {size}")
        self.bytes_written += n

    def _finish(self) -> None:
        _replace(self._tmp, self.path)

    def _cleanup(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)


class TarWriter(ArtifactWriter):
    """A tar stream, optionally gzip-compressed on the fly, into a temporary file."""

    def __init__(self, path: Path, level: int = 0) -> None:
        super().__init__(path)
        self._tmp = _tmp_name(path)
        self._file: BinaryIO = open(self._tmp, "wb")  # noqa: SIM115 - closed in finish/cleanup
        self._z: Compressor | None = None
        if level:
            self._z, self.compressor_name = gzip_compressor(level)

    def _write(self, data: Any) -> None:
        if self._z is not None:
            out = self._z.compress(data)
            if out:
                self._file.write(out)
        else:
            self._file.write(data)

    def add_stream(self, name: str, size: int, chunks: Iterable[Any]) -> None:
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
            n += len(memoryview(c).cast("B"))
        if n != size:
            raise SerializationError(f"{name}: streamed {n} bytes, expected {size}")
        pad = (-size) % BLOCK
        if pad:
            self._write(bytes(pad))
        self.bytes_written += size

    def _finish(self) -> None:
        self._write(bytes(2 * BLOCK))
        if self._z is not None:
            self._file.write(self._z.flush())
        self._file.close()
        _replace(self._tmp, self.path)

    def _cleanup(self) -> None:
        try:
            self._file.close()
        finally:
            self._tmp.unlink(missing_ok=True)


def open_writer(path: str | os.PathLike[str], compression_level: int | None = None) -> ArtifactWriter:
    """A writer for ``path`` in the form its suffix (or ``compression_level``) selects."""
    p = Path(path)
    form, level = artifact_form(p, compression_level)
    if not p.parent.exists():
        raise InvalidArgumentError(f"folder {p.parent} does not exist")
    if form == "dir":
        return DirWriter(p)
    return TarWriter(p, level if form == "tgz" else 0)


# -- reading ------------------------------------------------------------------------


def read_artifact(path: str | os.PathLike[str]) -> dict[str, bytes]:
    """All members of an artifact (dir, tar or tgz) by name, validated."""
    p = Path(path)
    if p.is_dir():
        out: dict[str, bytes] = {}
        for f in sorted(p.rglob("*")):
            if f.is_file():
                out[f.relative_to(p).as_posix()] = f.read_bytes()
        return out
    return dict(iter_tar_members(p))


def iter_tar_members(path: Path) -> Iterator[tuple[str, bytes]]:
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


__all__ = ["ArtifactWriter", "artifact_form", "iter_tar_members", "open_writer", "read_artifact"]
