"""The CRC-32 of every member of a zip archive (PyTorch's ``.pt`` files, TorchScript
files), checked before the archive is loaded: ``torch.load`` does not check them, so
bytes flipped inside a tensor's data would otherwise load as silently wrong weights.

Members are read through one read-only mapping of the file, several at a time
(``zlib.crc32`` releases the GIL), so the check runs at the speed of the CRC on every
CPU and leaves the file in the page cache for the load that follows.
"""

from __future__ import annotations

import mmap
import os
import struct
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from t2n.errors import CorruptTensorFileError

_LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")
_LOCAL_MAGIC = 0x04034B50
_CHUNK = 64 << 20


def _stored_crc(view: memoryview, start: int, size: int) -> int:
    crc = 0
    for at in range(start, start + size, _CHUNK):
        crc = zlib.crc32(view[at:min(at + _CHUNK, start + size)], crc)
    return crc


def damaged_member(path: str | os.PathLike[str]) -> str | None:
    """The name of the first member of the zip at ``path`` whose bytes do not match its
    CRC-32 (or whose header is unreadable), None when every member is intact."""
    p = Path(path)
    with zipfile.ZipFile(p) as z:
        infos = [i for i in z.infolist() if not i.is_dir()]
        compressed = [i for i in infos if i.compress_type != zipfile.ZIP_STORED]
        for info in compressed:  # small (pickles, code): zipfile checks their CRC as it reads
            try:
                with z.open(info) as f:
                    while f.read(1 << 20):
                        pass
            except (zipfile.BadZipFile, zlib.error, EOFError):
                return info.filename
    stored = [i for i in infos if i.compress_type == zipfile.ZIP_STORED]
    if not stored:
        return None
    size = p.stat().st_size
    with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        view = memoryview(mm)
        try:
            spans = []
            for info in stored:
                head = info.header_offset
                if head + _LOCAL_HEADER.size > size:
                    return info.filename
                fields = _LOCAL_HEADER.unpack_from(view, head)
                if fields[0] != _LOCAL_MAGIC:
                    return info.filename
                start = head + _LOCAL_HEADER.size + fields[9] + fields[10]
                if start + info.file_size > size:
                    return info.filename
                spans.append((info, start))
            workers = max(1, min(len(spans), os.cpu_count() or 1))
            with ThreadPoolExecutor(workers, thread_name_prefix="t2n-zip-crc") as pool:
                crcs = list(pool.map(lambda s: _stored_crc(view, s[1], s[0].file_size), spans))
            bad = next((info.filename for (info, _), crc in zip(spans, crcs) if crc != info.CRC), None)
        finally:
            view.release()
    return bad


def check_zip_crcs(path: str | os.PathLike[str], what: str = "PyTorch file") -> None:
    """Refuse a zip archive with a damaged member (:class:`CorruptTensorFileError`)."""
    try:
        bad = damaged_member(path)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise CorruptTensorFileError(f"{path}: not a readable zip archive ({exc}); save the {what} again") from exc
    if bad is not None:
        raise CorruptTensorFileError(
            f"{path}: member {bad!r} fails its CRC check: the file is damaged (its bytes changed after "
            f"it was written) and would load as wrong values; save the {what} again")


__all__ = ["check_zip_crcs", "damaged_member"]
