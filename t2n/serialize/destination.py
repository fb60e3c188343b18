"""What a save may replace: only an artifact t2n wrote, unless ``overwrite=True``.

Saving replaces whatever is at the destination, so t2n first looks at it. *An artifact
t2n wrote* is:

- a **directory** (not a link) that holds only ``graph.nnef``, ``graph.quant`` and NNEF
  tensor files (names ending in ``.dat`` that start with the ``.dat`` magic bytes
  ``4e ef``), the tensor files possibly in nested folders of tensor files only, and
  t2n's own temporary names. An empty directory qualifies too: nothing in it can be lost.
- a **regular file** (not a link) that is a tar archive, plain or gzip-compressed,
  whose first member is a regular file named ``graph.nnef``, ``graph.quant`` or
  ``*.dat`` (t2n writes the tensors first, then the graph). Only the first header is
  read, so the test is cheap even for a multi-GB ``.tgz``.

Such an artifact is replaced whatever its form (a ``.tar`` t2n wrote may become a
directory artifact and the other way round). Anything else (a folder holding other
files, a folder named ``x.tar``, a file that is not such an archive, a symbolic link,
a device) gives :class:`~t2n.errors.OverwriteRefusedError` and is left untouched,
unless the caller passes ``overwrite=True``: then it is deleted once the new artifact
is complete (a link itself, not what it points to).

Tensor exports into a folder (:class:`~t2n.serialize.archive.IntoDirWriter`) replace
only the files they write: a regular ``.dat`` file of the same name may be replaced
(those calls name each file they write), any other existing entry of that name is
refused.
"""

from __future__ import annotations

import errno
import os
import stat
import tarfile
import zlib
from pathlib import Path

from t2n.errors import ArtifactWriteError, OverwriteRefusedError
from t2n.serialize.staging import is_temp_name, remove_stale_temps

GRAPH_FILES = frozenset({"graph.nnef", "graph.quant"})
DAT_MAGIC = b"\x4e\xef"
_ADVICE = "pass overwrite=True to replace it, or choose another path"


def _is_tensor_file(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(2) == DAT_MAGIC
    except FileNotFoundError:  # gone meanwhile (another save replaced the folder): nothing to lose
        return True
    except OSError:
        return False


def foreign_entry(folder: Path, top: bool = True) -> str | None:
    """The first entry of ``folder`` (relative path and why) that makes it not a
    directory artifact t2n wrote, or None when every entry is one t2n writes."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except FileNotFoundError:  # gone meanwhile: nothing to lose
        return None
    except OSError as exc:
        return f"its entries cannot be listed ({exc.strerror})"
    for entry in entries:
        if is_temp_name(entry.name):  # what a crashed tensor export left: t2n's too
            continue
        if entry.is_symlink():
            return f"{entry.name} is a link"
        if entry.is_dir(follow_symlinks=False):
            inner = foreign_entry(Path(entry.path), top=False)
            if inner is not None:
                return f"{entry.name}/{inner}"
        elif not entry.is_file(follow_symlinks=False):
            return f"{entry.name} is not a regular file"
        elif top and entry.name in GRAPH_FILES:
            continue
        elif not entry.name.endswith(".dat"):
            return f"{entry.name} is not an NNEF graph or tensor file"
        elif not _is_tensor_file(entry.path):
            return f"{entry.name} is not an NNEF tensor file (no .dat magic)"
    return None


def first_tar_member(path: Path) -> str | None:
    """The name of the first member of the tar (or gzip-compressed tar) at ``path`` when
    it is a regular file, else None (not an archive, empty, unreadable). Raises
    ``FileNotFoundError`` when the file is gone."""
    try:
        with tarfile.open(path, "r|*") as tar:
            member = tar.next()
    except FileNotFoundError:  # gone meanwhile: the caller looks again
        raise
    except (tarfile.TarError, EOFError, OSError, zlib.error):
        return None
    return member.name if member is not None and member.isfile() else None


def is_artifact_archive(path: Path) -> bool:
    name = first_tar_member(path)
    if name is None:
        return False
    base = name.rsplit("/", 1)[-1]
    return name in GRAPH_FILES or (base.endswith(".dat") and base != ".dat")


def why_not_artifact(path: Path) -> str | None:
    """Why what is at ``path`` (which exists) is not an artifact t2n wrote, or None."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if stat.S_ISDIR(st.st_mode):
        entry = foreign_entry(path)
        return None if entry is None else f"it is a folder and {entry}"
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file or folder"
    if is_artifact_archive(path):
        return None
    return "it is a file that is not an NNEF tar or tgz archive"


def check_destination(path: Path, overwrite: bool) -> bool:
    """Whether something is at ``path``; raises when it may not be replaced.

    Raises :class:`OverwriteRefusedError` when ``path`` holds something t2n did not
    write (see the module docstring) and ``overwrite`` is false.
    """
    try:
        why = why_not_artifact(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise ArtifactWriteError(f"cannot look at {path} before replacing it: {exc.strerror}", exc) from exc
    if why is not None and not overwrite:
        raise OverwriteRefusedError(
            f"{path} holds something t2n did not write ({why}); t2n replaces only artifacts it "
            f"wrote, and left it untouched: {_ADVICE}")
    return True


def check_member_target(final: Path) -> None:
    """Refuse to write a tensor file where an entry other than a regular ``.dat`` file is."""
    try:
        st = os.lstat(final)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ArtifactWriteError(f"cannot look at {final} before replacing it: {exc.strerror}", exc) from exc
    if stat.S_ISREG(st.st_mode) and final.name.endswith(".dat"):
        return
    kind = ("a symbolic link" if stat.S_ISLNK(st.st_mode) else "a folder" if stat.S_ISDIR(st.st_mode)
            else "a file that is not a .dat tensor file" if stat.S_ISREG(st.st_mode) else "a special file")
    raise OverwriteRefusedError(
        f"{final} is {kind}; t2n only replaces .dat files of the tensors it writes and left it "
        "untouched: remove or rename it, or write the tensors to another folder")


def name_max(folder: Path) -> int:
    """The longest file name (in bytes) the file system of ``folder`` takes (255 when unknown)."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def check_name_length(path: Path) -> None:
    """Refuse, before anything is written, a destination name the file system cannot hold."""
    limit = name_max(path.parent)
    if len(os.fsencode(path.name)) > limit:
        cause = OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG), str(path))
        raise ArtifactWriteError(
            f"cannot write {path}: its name is {len(os.fsencode(path.name))} bytes long and the file "
            f"system takes at most {limit} ({cause.strerror}); choose a shorter name", cause) from cause


def prepare_destination(path: Path, overwrite: bool) -> None:
    """Before writing to ``path``: a name the file system takes, nothing there that t2n
    did not write (unless ``overwrite``), and no leftovers of crashed saves to it."""
    check_name_length(path)
    check_destination(path, overwrite)
    remove_stale_temps(path.parent, path.name)


__all__ = [
    "check_destination", "check_member_target", "check_name_length", "first_tar_member",
    "foreign_entry", "is_artifact_archive", "name_max", "prepare_destination", "why_not_artifact",
]
