"""Reading ``.safetensors`` files lazily, without torch and without loading them.

A file is an 8-byte little-endian header length, a JSON header (name → dtype, shape,
``data_offsets`` relative to the end of the header, plus an optional
``__metadata__``), then the tensor bytes. :func:`open_safetensors` validates the
header against the file size and returns one :class:`~t2n.ir.LazyData` per tensor,
which reads its bytes with plain sequential reads, one bounded chunk at a time, when
it is written. Nothing is memory-mapped, so the resident memory of an export from a
safetensors file stays near one chunk, whatever the file's size.

Sharded checkpoints are read through their ``*.safetensors.index.json`` (as written by
``transformers``) or a folder of ``.safetensors`` files: :func:`open_weights`.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from t2n.errors import CorruptTensorFileError, InvalidArgumentError
from t2n.ir import DType, LazyData
from t2n.ir.float8 import FLOAT8_FORMATS, Float8Format, decode_float8
from t2n.ir.tensor_data import DEFAULT_CHUNK_BYTES, FileRegion, FileStamp
from t2n.serialize.filecheck import check_stamp

log = logging.getLogger("t2n")

MAX_HEADER_BYTES = 100 << 20
"""A header longer than this is taken as corruption (the reference reader's limit)."""

SAFETENSORS_DTYPES: dict[str, DType] = {
    "BOOL": DType.BOOL, "U8": DType.U8, "I8": DType.I8, "U16": DType.U16, "I16": DType.I16,
    "U32": DType.U32, "I32": DType.I32, "U64": DType.U64, "I64": DType.I64,
    "F16": DType.F16, "BF16": DType.BF16, "F32": DType.F32, "F64": DType.F64,
}
"""safetensors dtype names t2n reads as they are."""

SAFETENSORS_FLOAT8: dict[str, Float8Format] = {
    "F8_E4M3": FLOAT8_FORMATS["float8_e4m3fn"], "F8_E5M2": FLOAT8_FORMATS["float8_e5m2"],
    "F8_E4M3FNUZ": FLOAT8_FORMATS["float8_e4m3fnuz"], "F8_E5M2FNUZ": FLOAT8_FORMATS["float8_e5m2fnuz"],
    "F8_E8M0": FLOAT8_FORMATS["float8_e8m0fnu"],
}
"""8-bit float dtype names: NNEF and tract have no 8-bit float, so these tensors are read
as the type that holds each of their values exactly (see :mod:`t2n.ir.float8`)."""


@attrs.frozen
class SafetensorsEntry:
    """Where one tensor lies in its file (``offset`` counts from the file's start)."""

    name: str
    dtype: DType
    shape: tuple[int, ...]
    offset: int
    nbytes: int
    path: Path
    stamp: FileStamp | None = None
    """The file when its header was read: reading refuses it once it differs."""
    float8: Float8Format | None = None
    """The 8-bit float format of the stored bytes (``dtype`` is then what they become)."""


def _corrupt(path: Path, why: str) -> CorruptTensorFileError:
    return CorruptTensorFileError(f"{path}: not a valid safetensors file: {why}")


def _no_duplicates(path: Path) -> Any:
    """A ``json.loads`` hook that refuses repeated keys (plain ``json`` keeps the last)."""
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise _corrupt(path, f"the header names {key!r} twice (which one holds the data "
                                     "is ambiguous; the safetensors library refuses such files too)")
            out[key] = value
        return out
    return hook


def _read_header_bytes(p: Path) -> tuple[bytes, os.stat_result]:
    """The JSON header of ``p`` and the file's stat, with its length checked."""
    try:
        with open(p, "rb") as f:
            st = os.fstat(f.fileno())
            head = f.read(8)
            if len(head) < 8:
                raise _corrupt(p, f"{st.st_size} bytes is shorter than the 8-byte header length"
                                  + (" (the file is empty)" if st.st_size == 0 else ""))
            n = int.from_bytes(head, "little")
            if n > MAX_HEADER_BYTES or 8 + n > st.st_size:
                raise _corrupt(p, f"header length {n} does not fit in a file of {st.st_size} bytes")
            return f.read(n), st
    except IsADirectoryError:
        raise _corrupt(p, "it is a folder (give the folder itself, or its .safetensors.index.json, "
                          "for a sharded checkpoint)") from None


def _dtype_of(p: Path, name: str, dt_name: object) -> tuple[DType, Float8Format | None]:
    if not isinstance(dt_name, str):
        raise _corrupt(p, f"entry {name!r} has no dtype")
    f8 = SAFETENSORS_FLOAT8.get(dt_name)
    if f8 is not None:
        return f8.exported_as, f8
    dtype = SAFETENSORS_DTYPES.get(dt_name)
    if dtype is None:
        readable = [*SAFETENSORS_DTYPES, *SAFETENSORS_FLOAT8]
        raise CorruptTensorFileError(
            f"{p}: tensor {name!r} has dtype {dt_name}, which t2n cannot export to NNEF or tract "
            f"(readable: {', '.join(readable)})"
        )
    return dtype, None


def read_safetensors_header(path: str | os.PathLike[str]) -> tuple[dict[str, SafetensorsEntry], dict[str, str]]:
    """The entries (in file order) and the ``__metadata__`` of a safetensors file, validated."""
    p = Path(path)
    raw, st = _read_header_bytes(p)
    header, meta = _header_json(p, raw)
    data_start = 8 + len(raw)
    data_size = st.st_size - data_start
    stamp = FileStamp(st)
    entries: dict[str, SafetensorsEntry] = {}
    spans: list[tuple[int, int, str]] = []
    for name, info in header.items():
        if not isinstance(info, dict):
            raise _corrupt(p, f"entry {name!r} is not an object")
        dtype, f8 = _dtype_of(p, name, info.get("dtype"))
        shape, offsets = info.get("shape"), info.get("data_offsets")
        if (not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape)
                or not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(o, int) for o in offsets)):
            raise _corrupt(p, f"entry {name!r} has a malformed shape or data_offsets")
        begin, end = offsets
        expected = math.prod(shape) * (1 if f8 is not None else dtype.itemsize)
        if not 0 <= begin <= end <= data_size:
            raise _corrupt(p, f"tensor {name!r} at bytes [{begin}, {end}) lies outside the {data_size} data bytes")
        if end - begin != expected:
            raise _corrupt(p, f"tensor {name!r} of shape {shape} ({info['dtype']}) needs {expected} bytes, "
                              f"its offsets give {end - begin}")
        entries[name] = SafetensorsEntry(name, dtype, tuple(shape), data_start + begin, end - begin, p,
                                         stamp, f8)
        spans.append((begin, end, name))
    _check_no_overlap(p, spans)
    ordered = dict(sorted(entries.items(), key=lambda kv: kv[1].offset))
    return ordered, {str(k): str(v) for k, v in meta.items()}


def _header_json(p: Path, raw: bytes) -> tuple[dict[str, Any], dict[Any, Any]]:
    """The header's tensor entries and its ``__metadata__``, a file that is not the JSON
    object the format promises being a :class:`CorruptTensorFileError` naming the file."""
    try:
        header = json.loads(raw, object_pairs_hook=_no_duplicates(p))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _corrupt(p, f"header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise _corrupt(p, "header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict):
        raise _corrupt(p, "__metadata__ is not an object")
    return header, meta


def _check_no_overlap(p: Path, spans: list[tuple[int, int, str]]) -> None:
    """Tensors whose bytes overlap would read each other's data: refused, naming both."""
    spans.sort()
    for (_b0, e0, n0), (b1, _e1, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise _corrupt(p, f"tensors {n0!r} and {n1!r} overlap")


READ_CHUNK_BYTES = 8 << 20
"""Bytes per read. Small buffers are recycled by the allocator (no page faults, no
zeroing), which makes reading several times faster than with 64 MiB buffers."""


def _read_exact(f: Any, buf: np.ndarray, entry: SafetensorsEntry) -> None:
    view = buf.data.cast("B")
    got = 0
    while got < len(view):
        n = f.readinto(view[got:])
        if not n:
            raise CorruptTensorFileError(f"{entry.path}: tensor {entry.name!r} is truncated")
        got += n


def _what(entry: SafetensorsEntry) -> str:
    return f"tensor {entry.name!r}"


def _as_values(buf: np.ndarray, entry: SafetensorsEntry) -> np.ndarray:
    """Raw bytes of ``entry`` as its elements (8-bit floats decoded to what they become)."""
    if entry.float8 is not None:
        return decode_float8(buf, entry.float8)
    return buf.view(entry.dtype.numpy.newbyteorder("<"))


def _load(entry: SafetensorsEntry) -> np.ndarray:
    buf = np.empty(entry.nbytes, dtype=np.uint8)
    with open(entry.path, "rb", buffering=0) as f:
        check_stamp(f.fileno(), entry.stamp, entry.path, _what(entry))
        f.seek(entry.offset)
        _read_exact(f, buf, entry)
        check_stamp(f.fileno(), entry.stamp, entry.path, _what(entry))
    return _as_values(buf, entry).reshape(entry.shape)


def _chunks(entry: SafetensorsEntry, max_bytes: int) -> Iterator[np.ndarray]:
    stored = 1 if entry.float8 is not None else entry.dtype.itemsize
    grow = entry.dtype.itemsize // stored  # 8-bit floats take 2 or 4 bytes once decoded
    budget = min(max_bytes, READ_CHUNK_BYTES) // grow
    step = max(stored, budget - budget % stored)
    with open(entry.path, "rb", buffering=0) as f:
        f.seek(entry.offset)
        left = entry.nbytes
        while left > 0:
            check_stamp(f.fileno(), entry.stamp, entry.path, _what(entry))
            # A fresh buffer per chunk (a consumer may keep a chunk alive), not zeroed.
            buf = np.empty(min(step, left), dtype=np.uint8)
            _read_exact(f, buf, entry)
            left -= buf.size
            yield _as_values(buf, entry)
        check_stamp(f.fileno(), entry.stamp, entry.path, _what(entry))


def lazy_tensor(entry: SafetensorsEntry) -> LazyData:
    """The tensor of ``entry``, read on demand (whole, or in chunks when written)."""
    def load() -> np.ndarray:
        return _load(entry)

    def chunks(max_bytes: int = DEFAULT_CHUNK_BYTES) -> Iterator[np.ndarray]:
        return _chunks(entry, max_bytes)

    region = None
    if entry.float8 is None:
        region = FileRegion(str(entry.path), entry.offset, entry.nbytes, entry.stamp, entry.name)
    else:
        log.warning("%s: tensor %r is %s, which NNEF and tract cannot store: it is read as %s "
                    "(exactly: every %s value is an %s value)", entry.path, entry.name,
                    entry.float8.name, entry.dtype, entry.float8.name, entry.dtype)
    return LazyData(entry.dtype, entry.shape, load=load, chunks=chunks,
                    description=f"{entry.path.name}:{entry.name}", region=region)


def open_safetensors(path: str | os.PathLike[str]) -> dict[str, LazyData]:
    """Every tensor of one safetensors file, by name, in file order; nothing is read yet."""
    entries, _ = read_safetensors_header(path)
    return {name: lazy_tensor(e) for name, e in entries.items()}


def safetensors_files(path: str | os.PathLike[str]) -> list[Path]:
    """The files of a checkpoint: one ``.safetensors`` file, the shards named by a
    ``*.index.json``, or every ``.safetensors`` file in a folder (its index if it has one).
    Shards stay inside the checkpoint's folder: a name that leads out of it (``..``, an
    absolute path, a link to elsewhere) is refused (see :func:`escaping_shard`)."""
    p = Path(path)
    if p.is_dir():
        indexes = sorted(p.glob("*.safetensors.index.json"))
        if len(indexes) == 1:
            return safetensors_files(indexes[0])
        files = sorted(p.glob("*.safetensors"))
        if not files:
            raise InvalidArgumentError(f"{p} holds no .safetensors file")
        for f in files:
            why = escaping_shard(p, f.name)
            if why is not None:
                raise CorruptTensorFileError(f"{f}: {why}; a checkpoint's shards stay inside its folder")
        return files
    if p.name.endswith(".index.json"):
        try:
            index = json.loads(p.read_text(), object_pairs_hook=_no_duplicates(p))
            weight_map = index["weight_map"]
            odd = next(((k, v) for k, v in weight_map.items() if not isinstance(v, str) or not v), None)
            if odd is not None:
                raise TypeError(f"tensor {odd[0]!r} is mapped to {odd[1]!r}, not a shard file name")
            shards = sorted(set(weight_map.values()))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptTensorFileError(f"{p}: not a safetensors index ({exc})") from None
        for s in shards:
            why = escaping_shard(p.parent, s)
            if why is not None:
                raise CorruptTensorFileError(f"{p}: names the shard {s!r}, which {why}; a checkpoint's "
                                             "shards stay inside its folder")
        missing = [s for s in shards if not (p.parent / s).is_file()]
        if missing:
            raise CorruptTensorFileError(f"{p}: names shard(s) that are not files beside it: "
                                         f"{', '.join(map(repr, missing[:5]))}")
        return [p.parent / s for s in shards]
    if not p.exists():
        raise FileNotFoundError(p)
    return [p]


def escaping_shard(folder: Path, name: str) -> str | None:
    """Why the shard ``name`` of the checkpoint in ``folder`` leads out of it (None: it
    does not). A link is followed: it must end inside the folder, or in the ``blobs/``
    of the Hugging Face cache repository whose snapshot the folder is
    (``<repo>/snapshots/<revision>``, whose files link to ``<repo>/blobs/``)."""
    if Path(name).is_absolute():
        return "is an absolute path, outside the checkpoint folder"
    root = folder.resolve()
    target = (folder / name).resolve()
    if target == root or root in target.parents:
        return None
    if folder.parent.name == "snapshots" and (root.parent.parent / "blobs") in target.parents:
        return None  # the Hugging Face cache's layout
    if not any((folder / Path(*Path(name).parts[:i])).is_symlink() for i in range(1, len(Path(name).parts) + 1)):
        return f"leads outside the checkpoint folder (to {target})"
    return f"is a link leading outside the checkpoint folder (to {target})"


def open_weights(path: str | os.PathLike[str]) -> dict[str, LazyData]:
    """Every tensor of a (possibly sharded) safetensors checkpoint, by name."""
    out: dict[str, LazyData] = {}
    for f in safetensors_files(path):
        for name, data in open_safetensors(f).items():
            if name in out:
                raise CorruptTensorFileError(f"tensor {name!r} appears in two shards (second: {f})")
            out[name] = data
    return out


__all__ = [
    "SAFETENSORS_DTYPES", "SAFETENSORS_FLOAT8", "SafetensorsEntry", "lazy_tensor", "open_safetensors", "open_weights",
    "escaping_shard", "read_safetensors_header", "safetensors_files",
]
