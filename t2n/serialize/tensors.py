"""Writing named tensors as ``.dat`` files into a folder (no graph): the torch-free core
of ``t2n.export_tensors_to_nnef`` and ``t2n.export_tensors_from_disk_to_nnef``.

File names: a tensor named ``name`` is written as ``tensor_file_name(name)``, which
is ``name + ".dat"`` when the name uses only ``A-Z a-z 0-9 . _ -`` and does not start
with ``.`` (so ``model.layers.0.weight`` → ``model.layers.0.weight.dat``, flat, dots
kept). Any other byte of the UTF-8 name is escaped as ``%XX`` (``/`` → ``%2F``, ``%``
→ ``%25``, a leading ``.`` → ``%2E``), which keeps the mapping one-to-one and
reversible (:func:`tensor_name_from_file`) and every file inside the folder.

The write is all-or-nothing: every file goes to a temporary name first and is renamed
into place only when all are complete (see :class:`~t2n.serialize.archive.IntoDirWriter`).
bf16 tensors are written as ``bf16_as`` (f16 by default), converted chunk by chunk.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs
import numpy as np

from t2n.errors import InvalidArgumentError
from t2n.ir import DType, TensorData
from t2n.ir.dtypes import bf16_export_dtype
from t2n.serialize.archive import IntoDirWriter
from t2n.serialize.dat import dat_size, iter_dat, read_dat
from t2n.serialize.filecheck import bad_address_error, is_bad_address
from t2n.serialize.progress import Progress

_SAFE = re.compile(r"[A-Za-z0-9._-]")


def tensor_file_name(name: str) -> str:
    """The ``.dat`` file name of tensor ``name`` (see the module docstring)."""
    if not name:
        raise InvalidArgumentError("a tensor name cannot be empty")
    out = []
    for i, ch in enumerate(name):
        if _SAFE.fullmatch(ch) and not (i == 0 and ch == "."):
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    return "".join(out) + ".dat"


def tensor_name_from_file(file_name: str) -> str:
    """The tensor name a ``.dat`` file name stands for (inverse of :func:`tensor_file_name`)."""
    if not file_name.endswith(".dat"):
        raise InvalidArgumentError(f"{file_name!r} is not a .dat file name")
    stem = file_name[:-4]
    raw = bytearray()
    i = 0
    while i < len(stem):
        if stem[i] == "%":
            raw += bytes.fromhex(stem[i + 1 : i + 3])
            i += 3
        else:
            raw += stem[i].encode()
            i += 1
    return raw.decode("utf-8")


@attrs.frozen
class WrittenTensor:
    """One tensor written by a tensor export."""

    name: str
    path: Path
    shape: tuple[int, ...]
    dtype: DType
    """The dtype in the file (bf16 sources are written as f16 or f32)."""
    source_dtype: DType
    nbytes: int
    """Size of the ``.dat`` file, header included."""

    @property
    def file_name(self) -> str:
        return self.path.name

    def read(self) -> np.ndarray:
        """The tensor read back from its file (validated)."""
        return read_dat(self.path)


def write_tensors(
    tensors: Mapping[str, TensorData] | Iterable[tuple[str, TensorData]],
    output_dir: str | os.PathLike[str],
    *,
    bf16_as: DType | str = DType.F16,
    progress: bool | None = None,
    sync: bool = False,
) -> dict[str, WrittenTensor]:
    """Write each (name, data) as ``output_dir/tensor_file_name(name)``; all or nothing.

    The folder is created if needed; files of other names in it are left alone, files
    of the same names are replaced. Every header is made before the first byte is
    written, so a tensor the format cannot hold (over 4 GiB) fails fast.
    """
    out_bf16 = bf16_export_dtype(bf16_as)
    items = list(tensors.items()) if isinstance(tensors, Mapping) else list(tensors)
    folder = Path(output_dir)
    if folder.exists() and not folder.is_dir():
        raise InvalidArgumentError(f"{folder} exists and is not a folder")
    plan = []
    seen: set[str] = set()
    for name, data in items:
        if name in seen:
            raise InvalidArgumentError(f"tensor {name!r} given twice")
        seen.add(name)
        dtype = out_bf16 if data.dtype is DType.BF16 else data.dtype
        chunks = iter_dat(data, dtype, regions=True, name=name)  # refuses what .dat cannot hold, before any write
        plan.append((name, tensor_file_name(name), data, dtype, dat_size(data, dtype), chunks))
    written: dict[str, WrittenTensor] = {}
    total = sum(p[4] for p in plan)
    label = f"writing {len(plan)} tensors to {folder}"
    with Progress(total, label, bar=progress) as bar, IntoDirWriter(folder, sync) as w:
        for name, file, data, dtype, size, chunks in plan:
            try:
                w.add_stream(file, size, bar.track(chunks))
            except OSError as exc:
                if is_bad_address(exc):  # a mapped source file shrank while it was written
                    raise bad_address_error(exc, f"tensor {name!r}") from exc
                raise
            written[name] = WrittenTensor(name, folder / file, data.shape, dtype, data.dtype, size)
    return written


__all__ = ["WrittenTensor", "tensor_file_name", "tensor_name_from_file", "write_tensors"]
