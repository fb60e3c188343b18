"""Reading an artifact on disk (a folder, ``.tar`` or ``.tgz``) for the command line:
its ``graph.nnef`` text and each ``.dat`` file's header, read with t2n's own validated
readers (no engine, no torch). Archives are read member by member, so memory stays
near the largest member."""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

from t2n.errors import CorruptArchiveError, CorruptTensorFileError, T2NError
from t2n.ir import DType
from t2n.serialize.archive_read import iter_tar_members
from t2n.serialize.dat import HEADER_SIZE, parse_header, read_dat_header


@attrs.frozen
class TensorHeader:
    """One ``.dat`` member: its path in the artifact, dtype, shape and size on disk."""

    path: str
    dtype: DType
    shape: tuple[int, ...]
    file_bytes: int


@attrs.frozen
class ArtifactFiles:
    path: Path
    form: str
    """``dir``, ``tar`` or ``tgz``."""
    graph_nnef: str
    tensors: tuple[TensorHeader, ...]
    others: tuple[str, ...]
    """Members that are neither ``graph.nnef`` nor ``.dat`` files (``graph.quant``...)."""


_WHAT = ("give an NNEF artifact: a folder, .tar or .tgz holding graph.nnef and .dat files, "
         "such as 't2n export' writes")


def _form(path: Path) -> str:
    if path.is_dir():
        return "dir"
    with open(path, "rb") as f:
        return "tgz" if f.read(2) == b"\x1f\x8b" else "tar"


def _members(path: Path) -> Iterator[tuple[str, bytes | Path]]:
    """(name, bytes or file path) of each artifact member; a folder's ``.dat`` files are
    given as paths, so only their headers are read."""
    if path.is_dir():
        for f in sorted(path.rglob("*")):
            if f.is_symlink():
                raise CorruptArchiveError(f"{path}: {f.relative_to(path)} is a link; an artifact holds files only")
            if f.is_file():
                yield f.relative_to(path).as_posix(), f
        return
    yield from iter_tar_members(path)


def read_artifact_files(path: str | os.PathLike[str]) -> ArtifactFiles:
    """``graph.nnef`` and the tensor headers of the artifact at ``path``.

    Unreadable archives raise ``CorruptArchiveError``, bad ``.dat`` headers (or a size
    that disagrees with the header) ``CorruptTensorFileError``, each naming the member."""
    p = Path(path)
    try:
        form = _form(p)
        graph: str | None = None
        tensors: list[TensorHeader] = []
        others: list[str] = []
        for name, data in _members(p):
            if name == "graph.nnef":
                raw = data.read_bytes() if isinstance(data, Path) else data
                graph = _decode(raw, p)
            elif name.endswith(".dat"):
                tensors.append(_header(name, data, p))
            else:
                others.append(name)
    except CorruptArchiveError as exc:
        raise CorruptArchiveError(f"{exc}\nWhat to do: {_WHAT}") from exc
    except T2NError:
        raise
    except OSError as exc:
        raise CorruptArchiveError(f"{p}: cannot read the artifact: {exc}") from exc
    if graph is None:
        raise CorruptArchiveError(f"{p}: no graph.nnef in this {form}\nWhat to do: {_WHAT}")
    return ArtifactFiles(p, form, graph, tuple(tensors), tuple(others))


def _decode(raw: bytes, path: Path) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptArchiveError(f"{path}: graph.nnef is not UTF-8 text ({exc})") from exc


def _header(name: str, data: bytes | Path, artifact: Path) -> TensorHeader:
    if isinstance(data, Path):
        dtype, shape = read_dat_header(data)
        return TensorHeader(name, dtype, shape, data.stat().st_size)
    where = f"{artifact}: {name}"
    dtype, shape, bits = parse_header(data[:HEADER_SIZE], where)
    declared = (math.prod(shape) * bits + 7) // 8
    if len(data) - HEADER_SIZE != declared:
        raise CorruptTensorFileError(
            f"{where}: {len(data) - HEADER_SIZE} payload bytes but the header's shape "
            f"{list(shape)} needs {declared} (truncated or padded); write the artifact again")
    return TensorHeader(name, dtype, shape, len(data))


@contextmanager
def as_folder(path: Path) -> Iterator[Path]:
    """The artifact as a folder: itself, or an archive unpacked (validated) into a
    temporary folder removed afterwards (the Khronos interpreter reads folders only)."""
    if path.is_dir():
        yield path
        return
    tmp = Path(tempfile.mkdtemp(prefix="t2n-cli-"))
    try:
        for name, data in iter_tar_members(path):
            out = tmp / name
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
