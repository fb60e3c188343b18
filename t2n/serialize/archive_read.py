"""Reading artifacts back (a directory, ``.tar`` or ``.tgz``), validated: members that
escape the folder, links, special files, truncated or duplicate members are refused."""

from __future__ import annotations

import os
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from t2n.errors import CorruptArchiveError


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


def checked_members(tar: tarfile.TarFile, path: Path) -> Iterator[tuple[str, tarfile.TarInfo]]:
    """(name, member) of each regular file of an open artifact archive, refusing members
    that escape the folder, links, special files and names given twice (tar keeps both,
    and which one a reader takes is up to the reader). A leading ``./`` is dropped."""
    seen: set[str] = set()
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
        yield name, m


def iter_tar_members(path: Path) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of each file in a tar/tgz artifact, validated as
    :func:`checked_members` does, refusing truncated members too."""
    try:
        with tarfile.open(path, "r:*") as tar:
            for name, m in checked_members(tar, path):
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
