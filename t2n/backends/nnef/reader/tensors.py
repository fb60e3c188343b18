"""An artifact on disk opened for reading: its ``graph.nnef`` and ``graph.quant`` texts
and its ``.dat`` tensors, each mapped lazily.

* A folder: each ``.dat`` file is memory-mapped where it lies.
* A ``.tar``: members are stored uncompressed at known offsets, so each tensor is
  memory-mapped inside the archive file itself.
* A ``.tgz``: gzip cannot be read at an offset; the archive is decompressed once, in one
  streaming pass, and its ``.dat`` members are written to a private temporary folder
  (removed when the last tensor read from it is gone) and mapped from there. Memory stays
  near one member's chunk; the disk needs room for the tensors.

Every tensor's 128-byte header is validated when the artifact is opened (magic, version,
item type, rank, the payload size it declares against the bytes present), with t2n's own
``.dat`` reader: a truncated or corrupt file is a ``CorruptTensorFileError`` naming it,
never data read as garbage. Payload bytes are read only when someone reads the values,
or copied file to file when the artifact is written again. Path components starting with
``.`` are skipped, as tract skips them.
"""

from __future__ import annotations

import functools
import math
import os
import shutil
import struct
import tarfile
import tempfile
import weakref
import zlib
from collections.abc import Callable
from pathlib import Path

import attrs
import numpy as np

from t2n.errors import CorruptArchiveError, CorruptTensorFileError, NNEFReadError
from t2n.ir import DType, LazyData, TensorData
from t2n.ir.tensor_data import FileRegion, FileStamp
from t2n.quant import q4_0
from t2n.serialize.archive_read import checked_members
from t2n.serialize.dat import HEADER_SIZE, parse_header


@attrs.frozen
class Member:
    """A ``.dat`` file: where its bytes start in ``file`` and how many there are."""

    file: Path
    offset: int
    size: int
    stamp: FileStamp = attrs.field(eq=False)


class ArtifactSource:
    """The texts and tensors of an artifact (see the module docstring)."""

    def __init__(self, path: Path, form: str, graph_nnef: str, graph_quant: str | None,
                 members: dict[str, Member], others: list[str], tmp: str | None = None) -> None:
        self.path, self.form = path, form
        self.graph_nnef, self.graph_quant = graph_nnef, graph_quant
        self.members = members
        self.others = others
        if tmp is not None:
            weakref.finalize(self, shutil.rmtree, tmp, True)

    @property
    def labels(self) -> list[str]:
        return sorted(self.members)

    def tensor(self, label: str) -> TensorData:
        """The tensor ``label`` (its path without ``.dat``), header checked, mapped lazily."""
        member = self.members[label]
        where = f"{self.path}: {label}.dat"
        with open(member.file, "rb") as f:
            f.seek(member.offset)
            head = f.read(HEADER_SIZE)
        if len(head) < HEADER_SIZE or member.size < HEADER_SIZE:
            raise CorruptTensorFileError(f"{where}: {member.size} bytes is shorter than the 128-byte header")
        declared = struct.unpack_from("<I", head, 4)[0]
        have = member.size - HEADER_SIZE
        if have != declared:
            what = "truncated" if have < declared else "longer than its header says"
            raise CorruptTensorFileError(f"{where}: {what}: {have} of {declared} payload bytes")
        if q4_0.is_q4_0_header(head):
            return self._q4_0(member, head, where)
        dtype, shape, bits = parse_header(head, where)
        return _mapped(self, member, dtype, shape, bits, label)

    def _q4_0(self, member: Member, head: bytes, where: str) -> TensorData:
        rank = struct.unpack_from("<I", head, 8)[0]
        extents = struct.unpack_from("<8I", head, 12)
        if rank > 8 or any(extents[rank:]):
            raise CorruptTensorFileError(f"{where}: bad rank {rank} or extents {list(extents)}")
        shape = tuple(int(d) for d in extents[:rank])
        problem = q4_0.shape_problem(shape)
        if problem is not None:
            raise CorruptTensorFileError(f"{where}: a Q4_0 tensor of shape {list(shape)}: {problem}")
        if member.size - HEADER_SIZE != q4_0.payload_size(shape):
            raise CorruptTensorFileError(
                f"{where}: Q4_0 shape {list(shape)} needs {q4_0.payload_size(shape)} payload bytes")
        blocks = np.memmap(member.file, dtype=np.uint8, mode="r", offset=member.offset + HEADER_SIZE,
                           shape=(member.size - HEADER_SIZE,))
        return q4_0.Q40Blocks(np.asarray(blocks), shape, where)


def _mapped(source: ArtifactSource, member: Member, dtype: DType, shape: tuple[int, ...], bits: int,
            label: str) -> LazyData:
    count = math.prod(shape)
    offset = member.offset + HEADER_SIZE
    nbytes = member.size - HEADER_SIZE

    def load() -> np.ndarray:
        _ = source  # the source (and a .tgz's temporary folder) lives while the tensor does
        if count == 0:
            return np.zeros(shape, dtype=dtype.numpy)
        if dtype is DType.BOOL:
            raw = np.memmap(member.file, dtype=np.uint8, mode="r", offset=offset, shape=(nbytes,))
            if bits == 1:
                return np.unpackbits(raw, count=count).astype(bool).reshape(shape)
            return np.asarray(raw != 0).reshape(shape)
        le = np.dtype(dtype.numpy).newbyteorder("<")
        return np.asarray(np.memmap(member.file, dtype=le, mode="r", offset=offset, shape=shape))

    region = FileRegion(str(member.file), offset, nbytes, member.stamp, f"{label}.dat") \
        if dtype is not DType.BOOL else None
    return LazyData(dtype, shape, load, description=f"{source.path}: {label}.dat", region=region)


def open_artifact(path: str | os.PathLike[str]) -> ArtifactSource:
    """The artifact at ``path``: a folder, a ``.tar`` or ``.tgz`` (told apart by their
    first bytes, as tract does), or a ``graph.nnef`` file (its folder is the artifact)."""
    p = Path(path)
    if not p.exists():
        raise NNEFReadError(f"{p}: no such file or folder")
    if p.is_file() and p.name == "graph.nnef":
        p = p.parent
    try:
        if p.is_dir():
            return _open_dir(p)
        with open(p, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
        return _open_tgz(p) if gz else _open_tar(p)
    except (tarfile.TarError, EOFError, zlib.error) as exc:
        raise CorruptArchiveError(f"{p}: unreadable archive: {exc}") from exc


def _hidden(name: str) -> bool:
    return any(part.startswith(".") for part in name.split("/"))


def _texts(p: Path, texts: dict[str, bytes], members: dict[str, Member], others: list[str], form: str,
           tmp: str | None = None) -> ArtifactSource:
    if "graph.nnef" not in texts:
        raise NNEFReadError(f"{p}: no graph.nnef in this {form}; give an NNEF artifact (a folder, "
                            ".tar or .tgz holding graph.nnef and .dat files)")
    try:
        graph = texts["graph.nnef"].decode("utf-8")
        quant = texts["graph.quant"].decode("utf-8") if "graph.quant" in texts else None
    except UnicodeDecodeError as exc:
        raise NNEFReadError(f"{p}: graph.nnef or graph.quant is not UTF-8 text ({exc})") from exc
    return ArtifactSource(p, form, graph, quant, members, others, tmp)


def _sort(name: str, read: Callable[[], bytes], texts: dict[str, bytes], others: list[str]) -> bool:
    """True when ``name`` is a ``.dat`` member; texts are kept (``read`` gives them),
    other names listed."""
    if name.endswith(".dat"):
        return True
    if name in ("graph.nnef", "graph.quant"):
        texts[name] = read()
    else:
        others.append(name)
    return False


def _open_dir(p: Path) -> ArtifactSource:
    texts: dict[str, bytes] = {}
    members: dict[str, Member] = {}
    others: list[str] = []
    for f in sorted(p.rglob("*")):
        name = f.relative_to(p).as_posix()
        if _hidden(name):
            continue
        if f.is_symlink():
            raise CorruptArchiveError(f"{p}: {name} is a link; an artifact holds files only")
        if not f.is_file():
            continue
        st = f.stat()
        if _sort(name, f.read_bytes, texts, others):
            members[name[:-4]] = Member(f, 0, st.st_size, FileStamp(st))
    return _texts(p, texts, members, others, "folder")


def _open_tar(p: Path) -> ArtifactSource:
    texts: dict[str, bytes] = {}
    members: dict[str, Member] = {}
    others: list[str] = []
    st = p.stat()
    stamp = FileStamp(st)
    with tarfile.open(p, "r:") as tar:
        for name, m in checked_members(tar, p):
            if _hidden(name):
                continue
            if m.offset_data + m.size > st.st_size:
                raise CorruptArchiveError(f"{p}: member {m.name!r} is truncated")
            if _sort(name, functools.partial(_read_member, tar, m, p), texts, others):
                members[name[:-4]] = Member(p, m.offset_data, m.size, stamp)
    return _texts(p, texts, members, others, ".tar")


def _read_member(tar: tarfile.TarFile, m: tarfile.TarInfo, p: Path) -> bytes:
    f = tar.extractfile(m)
    assert f is not None
    data = f.read()
    if len(data) != m.size:
        raise CorruptArchiveError(f"{p}: member {m.name!r} is truncated")
    return data


def _open_tgz(p: Path) -> ArtifactSource:
    texts: dict[str, bytes] = {}
    members: dict[str, Member] = {}
    others: list[str] = []
    tmp = tempfile.mkdtemp(prefix="t2n-read-")
    try:
        with tarfile.open(p, "r|gz") as tar:
            for name, m in checked_members(tar, p):
                if _hidden(name):
                    continue
                if not _sort(name, functools.partial(_read_member, tar, m, p), texts, others):
                    continue
                out = Path(tmp) / name
                out.parent.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(m)
                assert src is not None
                with open(out, "wb") as f:
                    shutil.copyfileobj(src, f, 8 << 20)
                size = out.stat().st_size
                if size != m.size:
                    raise CorruptArchiveError(f"{p}: member {m.name!r} is truncated")
                members[name[:-4]] = Member(out, 0, size, FileStamp(out.stat()))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return _texts(p, texts, members, others, ".tgz", tmp)
