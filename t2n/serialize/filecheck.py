"""Weight files that change while an artifact is saved.

Weights often stay in their file until they are written: read on demand from a
safetensors file, or memory-mapped (``torch.load(mmap=True)``, the ``safetensors``
library, ``numpy.memmap``). If that file is truncated after it was opened, touching a
mapped page past its new end kills the process with SIGBUS (or fails a ``write`` with
``EFAULT``), and a file rewritten in place would mix old and new bytes silently.

So every reader checks the file before it touches its bytes, one ``stat`` per chunk:

* files t2n opens keep a :class:`~t2n.ir.tensor_data.FileStamp` (device, inode, size,
  modification time) and are refused once the file differs (:func:`check_stamp`);
* arrays that may view a mapped file (found through ``/proc/self/maps`` on Linux) are
  refused once the file no longer reaches the end of their bytes
  (:func:`mapped_guard`), before any byte of them is read or converted.

Either way the save stops with a :class:`~t2n.errors.CorruptTensorFileError` naming the
file and the tensor, and the archive writers remove what was written.
"""

from __future__ import annotations

import bisect
import ctypes
import errno
import json
import mmap
import os
import sys
from collections.abc import Callable

import attrs
import numpy as np

from t2n.errors import CorruptTensorFileError
from t2n.ir.tensor_data import FileStamp

_ADVICE = ("nothing was written. Keep weight files unchanged until the save has ended, "
           "or load the weights again and compile again.")


def changed_error(path: str | os.PathLike[str], what: str, why: str) -> CorruptTensorFileError:
    """The error for a weight file that changed after it was opened."""
    tensor = f" (reading {what})" if what else ""
    return CorruptTensorFileError(f"{path}{tensor}: {why} after the weights were loaded from it; {_ADVICE}")


def check_stamp(fd: int, stamp: FileStamp | None, path: str | os.PathLike[str], what: str = "") -> None:
    """Refuse the file open as ``fd`` if it is not the one ``stamp`` describes."""
    if stamp is None:
        return
    why = stamp.change(os.fstat(fd))
    if why is not None:
        raise changed_error(path, what, why)


def stamp_of(path: str | os.PathLike[str]) -> FileStamp:
    return FileStamp(os.stat(path))


def is_bad_address(exc: BaseException) -> bool:
    """True for the ``OSError`` a ``write`` of mapped memory gives when its file shrank."""
    return isinstance(exc, OSError) and exc.errno == errno.EFAULT


def bad_address_error(exc: OSError, what: str) -> CorruptTensorFileError:
    return CorruptTensorFileError(
        f"{what}: its bytes could not be read (the memory-mapped file they lie in was "
        f"truncated while it was written: {exc.strerror}); {_ADVICE}")


# -- memory-mapped arrays ---------------------------------------------------------------


@attrs.frozen
class Mapping:
    """One file mapping of this process: addresses [start, end) show the file from ``offset``."""

    start: int
    end: int
    offset: int
    dev: int
    ino: int
    path: str


def read_mappings() -> list[Mapping]:
    """The file mappings of this process, by address (Linux; empty elsewhere)."""
    if sys.platform != "linux":
        return []
    out = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                if len(parts) < 6 or not parts[5].startswith("/"):
                    continue
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                major, minor = (int(x, 16) for x in parts[3].split(":"))
                out.append(Mapping(lo, hi, int(parts[2], 16), os.makedev(major, minor),
                                   int(parts[4]), parts[5].rstrip("\n")))
    except OSError:
        return []
    out.sort(key=lambda m: m.start)
    return out


class _MappingIndex:
    """``/proc/self/maps``, read again only when a cached answer cannot be confirmed."""

    def __init__(self) -> None:
        self._maps: list[Mapping] = []
        self._starts: list[int] = []

    def _find(self, address: int) -> Mapping | None:
        i = bisect.bisect_right(self._starts, address) - 1
        if i >= 0 and self._maps[i].start <= address < self._maps[i].end:
            return self._maps[i]
        return None

    def lookup(self, address: int) -> Mapping | None:
        m = self._find(address)
        if m is not None and _still_mapped(m):
            return m
        self._maps = read_mappings()
        self._starts = [x.start for x in self._maps]
        return self._find(address)


def _still_mapped(m: Mapping) -> bool:
    """Whether ``m`` is still mapped as it was (through ``/proc/self/map_files``, where
    this process may look there; else unknown, and the maps are read again)."""
    try:
        st = os.stat(f"/proc/self/map_files/{m.start:x}-{m.end:x}")
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (m.dev, m.ino)


_INDEX = _MappingIndex()


def may_be_mapped(arr: np.ndarray) -> bool:
    """True when ``arr`` views a ``numpy.memmap``/``mmap`` or memory of an unknown owner,
    whose file mapping is worth looking up; False for arrays owning their memory, views
    of bytes, and PyTorch tensors (which do not tell whether they are mapped)."""
    obj: object = arr
    for _ in range(64):
        if isinstance(obj, np.ndarray):
            if obj.base is None:
                return False
            obj = obj.base
        elif isinstance(obj, mmap.mmap):
            return True
        else:  # bytes; a torch.Tensor does not tell whether it is mapped (array_guard's page check covers it)
            return not isinstance(obj, (bytes, bytearray)) and not hasattr(obj, "untyped_storage")
    return True


def mapped_guard(arr: np.ndarray, what: str = "") -> Callable[[], None] | None:
    """A check to call before each chunk of ``arr`` is read, when ``arr`` views a mapped
    file: it raises :class:`CorruptTensorFileError` once the file no longer holds every
    byte of ``arr`` (a page past a file's end gives SIGBUS when touched). None when
    ``arr`` views no file."""
    if arr.size == 0 or arr.dtype == object or not may_be_mapped(arr):
        return None
    lo, hi = _byte_bounds(arr)
    m = _INDEX.lookup(lo)
    if m is None:
        return None
    needed = m.offset + (hi - m.start)
    own = f"/proc/self/map_files/{m.start:x}-{m.end:x}"

    def check() -> None:
        size = _mapped_size(m, own)
        if size is not None and size < needed:
            name = what or _tensor_at(m.path, m.offset + (lo - m.start))
            raise changed_error(m.path, name, f"it was truncated to {size} bytes (the mapped "
                                               f"tensor's bytes end at byte {needed})")

    return check


_MADV_POPULATE_READ = 22
_populate_works = sys.platform == "linux"


def _populate(lo: int, hi: int) -> bool | None:
    """Fault in the pages of [lo, hi) for reading through the kernel
    (``madvise(MADV_POPULATE_READ)``, Linux 5.14+), which answers EFAULT where a plain
    read would raise SIGBUS (a mapped page past its file's end). True when readable,
    False on EFAULT, None where the call is not available."""
    global _populate_works
    if not _populate_works:
        return None
    page = mmap.PAGESIZE
    start, stop = lo // page * page, -(-hi // page) * page
    libc = _libc()
    if libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(stop - start), ctypes.c_int(_MADV_POPULATE_READ)) == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.EFAULT:
        return False
    if err in (errno.EINVAL, errno.ENOSYS, errno.EPERM):
        _populate_works = False
    return None


_LIBC: list[ctypes.CDLL] = []


def _libc() -> ctypes.CDLL:
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


def array_guard(arr: np.ndarray, what: str = "") -> Callable[[np.ndarray | None], None] | None:
    """A check to call before the first chunk of ``arr`` (with None) and with each
    chunk before the chunk is read: it raises
    :class:`CorruptTensorFileError` instead of letting a read of a mapped page past its
    file's end kill the process. The chunk's last page is faulted in through the kernel
    (one system call per chunk); arrays that may view a file
    (e.g. ``numpy.memmap``) also have their file's size checked against their last byte,
    which catches a file cut in the middle of their last page too. None for arrays that
    hold no bytes."""
    if arr.size == 0 or arr.dtype == object:
        return None
    lo, hi = _byte_bounds(arr)
    exact = mapped_guard(arr, what) if may_be_mapped(arr) else None
    whole = not arr.flags.c_contiguous  # chunks are copies: check the source at once

    def check(chunk: np.ndarray | None = None) -> None:
        """``chunk=None`` before the first chunk."""
        if exact is not None:
            exact()
        if (chunk is None) != whole:
            return
        c_lo, c_hi = (lo, hi) if chunk is None else _byte_bounds(chunk)
        # A mapping shows its file in address order and a truncation cuts off a suffix of
        # it: when the chunk's last page is readable, all of the chunk is.
        if lo <= c_lo <= c_hi <= hi and _populate(c_hi - 1, c_hi) is False:
            raise _unreadable(c_lo, c_hi, what)

    return check


def ensure_readable(arr: np.ndarray, what: str = "") -> None:
    """Raise :class:`CorruptTensorFileError` unless every byte of ``arr`` can be read now
    (for code that reads a few elements spread over an array, e.g. a fingerprint, where a
    page past a truncated file's end would kill the process with SIGBUS)."""
    if arr.size == 0 or arr.dtype == object:
        return
    exact = mapped_guard(arr, what) if may_be_mapped(arr) else None
    if exact is not None:
        exact()
    lo, hi = _byte_bounds(arr)
    if _populate(hi - 1, hi) is False:
        raise _unreadable(lo, hi, what)


def _unreadable(lo: int, hi: int, what: str) -> CorruptTensorFileError:
    """The error for memory that cannot be read: the file mapped there, if found, shrank."""
    for m in read_mappings():
        if m.start <= lo < m.end:
            try:
                size = f"{os.stat(m.path).st_size} bytes"
            except OSError:
                size = "nothing (it is gone)"
            name = what or _tensor_at(m.path, m.offset + (lo - m.start))
            return changed_error(m.path, name, f"it was truncated to {size} (the mapped tensor's "
                                               f"bytes reach byte {m.offset + hi - m.start})")
    return CorruptTensorFileError(f"{what or 'a tensor'}: its memory cannot be read (a memory-mapped "
                                  f"file under it was truncated?); {_ADVICE}")


def _byte_bounds(arr: np.ndarray) -> tuple[int, int]:
    """First and one-past-last byte addresses ``arr`` reads (any strides)."""
    lo = hi = int(arr.__array_interface__["data"][0])
    for n, stride in zip(arr.shape, arr.strides):
        if stride < 0:
            lo += (n - 1) * stride
        else:
            hi += (n - 1) * stride
    return lo, hi + arr.itemsize


def _mapped_size(m: Mapping, own: str) -> int | None:
    """The current size of the mapped file: the mapped inode itself where this process
    may look, else the file at its path if it is still the same inode (a file replaced
    under its name leaves the mapped one intact)."""
    for path, same in ((own, True), (m.path, False)):
        try:
            st = os.stat(path)
        except OSError:
            continue
        if same or (st.st_dev, st.st_ino) == (m.dev, m.ino):
            return st.st_size
    return None


def _tensor_at(path: str, offset: int) -> str:
    """The name of the safetensors tensor holding byte ``offset`` of ``path``, if any."""
    try:
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n)) if 0 < n < 100 << 20 else {}
    except (OSError, ValueError):
        return ""
    start = 8 + n
    for name, info in header.items() if isinstance(header, dict) else ():
        span = info.get("data_offsets") if isinstance(info, dict) else None
        if isinstance(span, list) and len(span) == 2 and start + span[0] <= offset < start + span[1]:
            return f"tensor {name!r}"
    return ""


__all__ = [
    "array_guard", "bad_address_error", "changed_error", "check_stamp", "is_bad_address", "mapped_guard",
    "may_be_mapped", "read_mappings", "stamp_of",
]
