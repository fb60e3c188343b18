"""Temporary names beside a destination, their removal after a crash, and the final
move into place.

Every save writes under a hidden name in the destination's folder,
``.<name>.t2n-tmp-<pid>-<8 hex>`` (``<name>`` shortened with a hash when long, so
the temporary name always fits where the final one does), unique per writer: saves
to one path from several threads or processes never share a temporary name. A
process killed with SIGKILL cannot clean up; the next save to the same destination
removes the temporary files and folders of that destination whose process is gone
(:func:`remove_stale_temps`): only names of this exact pattern, and only when the
recorded pid is no longer alive on this machine.

:func:`install` moves the complete temporary file or folder onto the destination.
On Linux it swaps the two atomically (``renameat2(RENAME_EXCHANGE)``), so the path
always holds a complete artifact, the new or the old one, then deletes the old one
(now under the temporary name). Elsewhere the old one is first renamed aside under
``.<name>.t2n-old-<pid>-<8 hex>``. Concurrent saves to one path each retry until
their own move succeeds: the last complete save wins and no ``ENOTEMPTY`` escapes.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import logging
import os
import re
import secrets
import shutil
import stat
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO

from t2n.errors import ArtifactWriteError, OverwriteRefusedError

log = logging.getLogger("t2n")

_STEM_MAX = 96
_TEMP = re.compile(r"^\.(?P<stem>.+)\.t2n-(?:tmp|old)-(?P<pid>\d+)(?:-[0-9a-f]+)?$")
_ATTEMPTS = 64


def temp_stem(name: str) -> str:
    """The part of ``name`` that temporary names carry (a prefix and a hash when long)."""
    if len(name.encode()) <= _STEM_MAX:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:10]
    return f"{name[:40]}~{digest}"


def temp_name(name: str, kind: str = "tmp") -> str:
    return f".{temp_stem(name)}.t2n-{kind}-{os.getpid()}-{secrets.token_hex(4)}"


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is one of t2n's temporary names (of any destination)."""
    return _TEMP.match(name) is not None


def new_temp_dir(parent: Path, name: str) -> Path:
    """A new empty folder with a unique temporary name for destination ``parent/name``."""
    while True:
        tmp = parent / temp_name(name)
        try:
            tmp.mkdir()
        except FileExistsError:
            continue
        return tmp


def new_temp_file(parent: Path, name: str) -> tuple[Path, BinaryIO]:
    """A new empty file (and its handle) with a unique temporary name for ``parent/name``;
    its permissions follow the umask as for any new file."""
    while True:
        tmp = parent / temp_name(name)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        except FileExistsError:
            continue
        return tmp, os.fdopen(fd, "wb")


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (in doubt: yes)."""
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. EPERM: it exists, owned by someone else
        return True
    return True


def remove_path(path: Path) -> None:
    """Delete a file, link or folder tree at ``path`` (a link itself, not its target)."""
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def find_stale_temps(folder: Path) -> dict[str, list[Path]]:
    """The temporary names in ``folder`` whose process is gone, by the destination
    stem they carry (:func:`temp_stem`)."""
    found: dict[str, list[Path]] = {}
    try:
        names = os.listdir(folder)
    except OSError:
        return found
    for entry in sorted(names):
        m = _TEMP.match(entry)
        if m is not None and not pid_alive(int(m["pid"])):
            found.setdefault(m["stem"], []).append(folder / entry)
    return found


def remove_paths(paths: Iterable[Path]) -> list[Path]:
    """Delete leftovers of crashed saves; returns what was removed. Never fails a save:
    what cannot be removed is logged and left."""
    removed: list[Path] = []
    for path in paths:
        try:
            remove_path(path)
        except FileNotFoundError:  # another save removed it first
            continue
        except OSError as exc:
            log.warning("could not remove %s, left by a save that crashed: %s", path, exc)
            continue
        log.info("removed %s, left by a save that crashed", path)
        removed.append(path)
    return removed


def remove_stale_temps(folder: Path, name: str) -> list[Path]:
    """Remove what crashed saves of destination ``folder/name`` left in ``folder``: its
    temporary names whose process is gone. Returns what was removed."""
    return remove_paths(find_stale_temps(folder).get(temp_stem(name), []))


_RENAME_NOREPLACE, _RENAME_EXCHANGE, _AT_FDCWD = 1, 2, -100
_renameat2: Any = None
if sys.platform.startswith("linux"):
    with contextlib.suppress(OSError, AttributeError):
        _renameat2 = ctypes.CDLL(None, use_errno=True).renameat2


def _rename2(src: Path, dst: Path, flags: int) -> bool:
    """``renameat2(src, dst, flags)``; False where the system or file system lacks it."""
    if _renameat2 is None:
        return False
    if _renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(src), None, str(dst))


def install(tmp: Path, path: Path, check: Callable[[], bool]) -> None:
    """Move the complete ``tmp`` onto ``path`` and delete what was there.

    ``check()`` runs before each attempt: it raises when what is at ``path`` may not be
    replaced and says whether something is there. Another save moving its own artifact
    there meanwhile makes the attempt start again.
    """
    for _ in range(_ATTEMPTS):
        present = check()
        try:
            if not present:
                if not _rename2(tmp, path, _RENAME_NOREPLACE):
                    _rename_fallback(tmp, path)
                return
            if _rename2(tmp, path, _RENAME_EXCHANGE):
                _remove_replaced(tmp)
                return
            if _move_aside_and_rename(tmp, path):
                return
        except (FileExistsError, FileNotFoundError):
            continue  # another save placed or moved an artifact there meanwhile
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.EISDIR, errno.ENOTDIR):
                raise
    raise ArtifactWriteError(
        f"cannot move the new artifact to {path}: other processes kept replacing it; "
        f"it is kept as {tmp}")


def make_folders(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; returns those this call created (to
    remove on abort only if empty again). Refuses an entry that is not a folder."""
    missing = []
    while not folder.is_dir():
        if os.path.lexists(folder):
            raise OverwriteRefusedError(
                f"{folder} is not a folder; tensor files are written into a folder: remove it or "
                "choose another folder")
        missing.append(folder)
        folder = folder.parent
    made = []
    for m in reversed(missing):
        try:
            m.mkdir()
        except FileExistsError:  # another writer made it meanwhile
            if not m.is_dir():
                raise
            continue
        made.append(m)
    return made


def remove_if_empty(folder: Path) -> None:
    """Remove ``folder`` if it is empty: files someone else put there keep it."""
    try:
        os.rmdir(folder)
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
            raise


def _rename_fallback(tmp: Path, path: Path) -> None:
    """Move ``tmp`` to a ``path`` found empty, without renameat2: a folder cannot land
    on a non-empty folder, and a file is linked (which fails if a file appeared)."""
    if tmp.is_dir():
        os.rename(tmp, path)
        return
    try:
        os.link(tmp, path)
    except OSError as exc:
        if exc.errno == errno.EEXIST:
            raise
        os.replace(tmp, path)  # no hard links on this file system
    else:
        os.unlink(tmp)


def _move_aside_and_rename(tmp: Path, path: Path) -> bool:
    """Rename what is at ``path`` aside, move ``tmp`` there, delete the old one."""
    aside = path.parent / temp_name(path.name, "old")
    os.rename(path, aside)
    try:
        os.rename(tmp, path)
    except OSError:
        try:
            os.rename(aside, path)  # put it back where it was when nothing took its place
        except OSError:
            _remove_replaced(aside)  # another save's artifact took its place: it is superseded
        raise
    _remove_replaced(aside)
    return True


def _remove_replaced(old: Path) -> None:
    """Delete the artifact that was replaced; a failure only leaves a hidden temporary
    name that a later save removes."""
    try:
        remove_path(old)
    except OSError as exc:
        log.warning("could not delete the replaced artifact, left as %s: %s", old, exc)


__all__ = [
    "find_stale_temps", "install", "is_temp_name", "make_folders", "new_temp_dir", "new_temp_file", "pid_alive",
    "remove_if_empty", "remove_path", "remove_paths", "remove_stale_temps", "temp_name", "temp_stem",
]
