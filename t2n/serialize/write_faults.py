"""File-system faults while writing an artifact, as typed errors, and cleanup that
never hides them.

An ``OSError`` raised while t2n writes its own files (a full disk, a read-only or
unwritable folder, a name too long, a file-size limit) becomes an
:class:`~t2n.errors.ArtifactWriteError` naming the destination, what was being
written, the cause and what to do, with the ``OSError`` as ``__cause__`` (and its
``errno``). Errors raised while *reading* what is written (the chunk iterator of a
member, opening a source file for a file-to-file copy, or memory that cannot be read)
are not write faults: they pass through unchanged, for the reader to type.

Cleanup after a failure runs every step even when one fails; a step that fails is
logged and added as a note to the error in flight, which stays the one raised.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from t2n.errors import ArtifactWriteError, T2NError
from t2n.serialize.filecheck import bad_address_error, is_bad_address

log = logging.getLogger("t2n")

_ADVICE = {
    errno.ENOSPC: "the disk is full: free some space or save elsewhere",
    errno.EDQUOT: "the disk quota is used up: free some space or save elsewhere",
    errno.EROFS: "the file system is read-only: save elsewhere",
    errno.EACCES: "this process may not write there: save elsewhere or change the folder's permissions",
    errno.EPERM: "this process may not write there: save elsewhere or change the folder's permissions",
    errno.ENAMETOOLONG: "a name is too long for the file system: choose a shorter path",
    errno.EFBIG: "the file is larger than the file system or the process's file-size limit allows",
}


class SourceChunks:
    """The chunks of a member, remembering whether the iterator itself failed (a
    reading fault, not a writing one)."""

    def __init__(self, chunks: Iterable[Any]) -> None:
        self._it = iter(chunks)
        self.failed = False

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        try:
            return next(self._it)
        except StopIteration:
            raise
        except BaseException:
            self.failed = True
            raise


def _under(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def is_write_fault(exc: OSError, roots: Sequence[Path]) -> bool:
    """Whether ``exc`` is about t2n's own files: no file name, or one under ``roots``.
    ``EFAULT`` (the memory to write could not be read, e.g. a mapped weight file that
    shrank) is a fault of the source, left for the reader to type."""
    if isinstance(exc, T2NError) or exc.errno == errno.EFAULT:
        return False
    names = [f for f in (exc.filename, getattr(exc, "filename2", None)) if f is not None]
    return not names or any(_under(Path(os.fsdecode(f)), roots) for f in names)


def write_error(path: Path, doing: str, exc: OSError) -> ArtifactWriteError:
    why = exc.strerror or str(exc)
    advice = _ADVICE.get(exc.errno or 0, "")
    return ArtifactWriteError(
        f"cannot write {path} ({doing}): {why}" + (f"; {advice}" if advice else "")
        + ". No artifact was written there.", exc)


@contextlib.contextmanager
def mapped_faults(path: Path, doing: str, roots: Sequence[Path],
                  source: SourceChunks | None = None) -> Iterator[None]:
    """Turn write faults inside the block into :class:`ArtifactWriteError`, and a write of
    mapped memory whose file shrank (``EFAULT``) into :class:`CorruptTensorFileError`."""
    try:
        yield
    except OSError as exc:
        if is_bad_address(exc) and not isinstance(exc, T2NError):
            raise bad_address_error(exc, f"a tensor written to {path} ({doing})") from exc
        if (source is not None and source.failed) or not is_write_fault(exc, roots):
            raise
        raise write_error(path, doing, exc) from exc


def run_cleanup(steps: Iterable[Callable[[], object]], what: str) -> None:
    """Run every cleanup step; failures are logged and noted on the error in flight."""
    current = sys.exc_info()[1]
    for step in steps:
        try:
            step()
        except FileNotFoundError:
            continue
        except OSError as exc:
            log.warning("could not clean up after a failed write of %s: %s", what, exc)
            add_note: Any = getattr(current, "add_note", None)
            if add_note is not None:
                add_note(f"t2n could not clean up after this failure ({what}): {exc}")


__all__ = ["SourceChunks", "is_write_fault", "mapped_faults", "run_cleanup", "write_error"]
