"""The torch edge of serialization: torch tensors and checkpoints in, ``.dat`` files out.

* :func:`export_tensors_to_nnef`, :func:`export_tensors_from_disk_to_nnef`,
  :func:`iter_torch_tensors_from_disk`: the public tensor-export helpers.
* :func:`weight_source` / :func:`resolve_weights`: weights that live on disk, for
  ``t2n.compile(..., weights_from=...)`` (models built on the meta device).
* :func:`convert_raw_fast`: dtype conversion of payload chunks with torch's kernels.

Checkpoints: ``.safetensors`` files (and sharded ones: an ``*.index.json`` or a folder)
are read lazily by :mod:`t2n.serialize.safetensors_reader`, one bounded chunk at a
time. ``.pt``/``.pth``/``.bin`` files are loaded with ``torch.load(weights_only=True,
mmap=True)`` when they are in torch's zip format (any ``torch.save`` since 1.6), so
their tensors are views of the mapped file; after a tensor has been written its pages
are handed back to the kernel, so resident memory stays near one tensor. Files in the
legacy format cannot be mapped and are loaded whole.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import os
import pickle
import re
import sys
import weakref
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from t2n.errors import CorruptTensorFileError, InvalidArgumentError
from t2n.ir import DType, LazyData, TensorData
from t2n.ir.dtypes import bf16_export_dtype
from t2n.ir.tensor_data import DEFAULT_CHUNK_BYTES, FileStamp, chunks_of, converted
from t2n.quant.parallel import convert_chunk
from t2n.serialize.filecheck import check_stamp, read_mappings
from t2n.serialize.safetensors_reader import open_weights, safetensors_files
from t2n.serialize.tensors import WrittenTensor, write_tensors
from t2n.serialize.zip_crc import check_zip_crcs
from t2n.torch_data import IR_TO_TORCH, exported_dtype, float8_data, tensor_data

log = logging.getLogger("t2n")

# -- conversion -----------------------------------------------------------------------


convert_raw_fast = convert_chunk
"""The ``.dat`` writer's chunk converter (:func:`t2n.quant.parallel.convert_chunk`)."""


# -- tensors --------------------------------------------------------------------------


def _meta_like(data: TensorData) -> torch.Tensor:
    return torch.empty(data.shape, dtype=IR_TO_TORCH[data.dtype], device="meta")


# -- checkpoints ----------------------------------------------------------------------


def is_safetensors(path: str | os.PathLike[str]) -> bool:
    p = Path(path)
    if p.is_dir():
        return True
    return p.name.endswith((".safetensors", ".safetensors.index.json"))


def _flatten(obj: Any, prefix: str) -> Iterator[tuple[str, torch.Tensor]]:
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from _flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _flatten(v, f"{prefix}.{i}" if prefix else str(i))


def load_torch_checkpoint(
    path: str | os.PathLike[str], map_location: Any = "cpu"
) -> tuple[dict[str, torch.Tensor], bool]:
    """(name → tensor, memory-mapped?) of a ``.pt``/``.pth``/``.bin`` file.

    Nested containers are flattened with dotted names (``{"model": {"w": t}}`` →
    ``model.w``); values that are not tensors are skipped (a file without any tensor is
    refused). Loaded with ``weights_only=True``: a checkpoint that needs arbitrary code
    is refused. A file that is not a checkpoint, or a truncated one, gives a
    :class:`~t2n.errors.CorruptTensorFileError` (torch's error is its ``__cause__``).
    """
    p = Path(path)
    if p.is_dir():
        raise CorruptTensorFileError(f"{p}: is a folder, not a PyTorch checkpoint file")
    if not p.is_file():
        raise FileNotFoundError(p)
    if p.stat().st_size == 0:
        raise CorruptTensorFileError(f"{p}: the file is empty, not a PyTorch checkpoint")
    mapped = zipfile.is_zipfile(p)
    if mapped:
        check_zip_crcs(p, "checkpoint (torch.save)")  # torch.load does not: flipped bytes load as wrong values
    try:
        obj = torch.load(p, map_location=map_location, mmap=mapped, weights_only=True)
    except Exception as exc:
        raise _unreadable_checkpoint(p, exc) from exc
    tensors = dict(_flatten(obj, ""))
    if not tensors:
        raise CorruptTensorFileError(
            f"{p}: holds no tensor (it holds a {type(obj).__name__}); expected a state dict "
            "(torch.save(model.state_dict(), path)) or another container of tensors")
    on_cpu = all(t.device.type == "cpu" for t in tensors.values())
    return tensors, mapped and on_cpu


def _unreadable_checkpoint(p: Path, exc: Exception) -> CorruptTensorFileError:
    """Why ``torch.load(weights_only=True)`` failed, said without torch's advice to load
    with ``weights_only=False`` (which runs any code the file holds)."""
    found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(exc))
    if isinstance(exc, pickle.UnpicklingError) and found is not None:
        return CorruptTensorFileError(
            f"{p}: holds a Python object of class {found.group(1)}, not only tensors and plain "
            "containers; t2n reads tensors without running code from the file. Save the tensors "
            "alone (torch.save(model.state_dict(), path), or a .safetensors file).")
    return CorruptTensorFileError(
        f"{p}: not a PyTorch checkpoint (zip or pickle) or truncated "
        f"({type(exc).__name__} while loading it); save it again with torch.save")


_MADV_DONTNEED = 4


def _file_mappings(path: Path) -> list[tuple[int, int]]:
    """Address ranges of this process mapped from ``path`` (Linux; empty elsewhere)."""
    target = os.path.realpath(path)
    return [(m.start, m.end) for m in read_mappings() if m.path == target]


def _release_pages(t: torch.Tensor, ranges: list[tuple[int, int]]) -> None:
    """Hand the pages of ``t`` back to the kernel, if they belong to a private mapping
    of the checkpoint file (never written: they are re-read from the file if touched
    again). Only whole pages inside the tensor are released."""
    if not ranges or sys.platform != "linux":
        return
    start = t.untyped_storage().data_ptr()
    end = start + t.untyped_storage().nbytes()
    page = mmap.PAGESIZE
    lo, hi = -(-start // page) * page, end // page * page
    if hi <= lo or not any(a <= lo and hi <= b for a, b in ranges):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), ctypes.c_int(_MADV_DONTNEED))


class _OpenCheckpoint:
    """The checkpoint file kept open while its mapped tensors may be written: its stamp
    is checked before each chunk is touched (the mapping shows the file as it is now; a
    page past a shrunk file's end gives SIGBUS)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDONLY)
        self.stamp = FileStamp(os.fstat(self.fd))
        weakref.finalize(self, os.close, self.fd)

    def check(self, name: str) -> None:
        check_stamp(self.fd, self.stamp, self.path, f"tensor {name!r}")


def _mapped_tensor_data(t: torch.Tensor, ranges: list[tuple[int, int]],
                        source: _OpenCheckpoint | None = None, name: str = "") -> TensorData:
    """A mapped checkpoint tensor as data whose pages are released once written."""
    view = tensor_data(t)

    def load() -> np.ndarray:
        if source is not None:
            source.check(name)
        return view.raw()

    def chunks(max_bytes: int = DEFAULT_CHUNK_BYTES) -> Iterator[np.ndarray]:
        for chunk in chunks_of(view.raw(), max_bytes):
            if source is not None:
                source.check(name)
            yield chunk
        _release_pages(t, ranges)

    return LazyData(view.dtype, view.shape, load=load, chunks=chunks,
                    description=f"{name} (mapped checkpoint)" if name else "mapped checkpoint")


def _float8_as_exported(tensors: dict[str, torch.Tensor]) -> dict[str, TensorData]:
    """The float8 tensors among ``tensors``, converted to what they are exported as."""
    out: dict[str, TensorData] = {}
    for n, t in tensors.items():
        data = float8_data(t, n)
        if data is not None:
            out[n] = data
    return out


def open_checkpoint(path: str | os.PathLike[str], map_location: Any = "cpu") -> dict[str, TensorData]:
    """Every tensor of a checkpoint as lazy (safetensors) or mapped (.pt) data, by name.
    A mapped file is refused once it changes (see :mod:`t2n.serialize.filecheck`)."""
    p = Path(path)
    if is_safetensors(p) and p.suffix not in (".pt", ".pth", ".bin"):
        return dict(open_weights(p))
    opened = _OpenCheckpoint(p) if p.is_file() else None
    tensors, mapped = load_torch_checkpoint(path, map_location)
    if opened is not None:
        opened.check("(any)")  # changed while torch loaded it
    ranges = _file_mappings(p) if mapped else []
    f8 = _float8_as_exported(tensors)
    return {n: f8[n] if n in f8 else _mapped_tensor_data(t, ranges, opened, n) if ranges else tensor_data(t)
            for n, t in tensors.items()}


def _select(names: Iterable[str], filter_key: Callable[[str], bool] | None) -> list[str]:
    if filter_key is not None and not callable(filter_key):
        raise InvalidArgumentError("filter_key must be a function of the tensor name returning a bool")
    return [n for n in names if filter_key is None or filter_key(n)]


def iter_torch_tensors_from_disk(
    path: str | os.PathLike[str],
    filter_key: Callable[[str], bool] | None = None,
    map_location: Any = "cpu",
) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) for each tensor of a checkpoint, one at a time, in file order.

    safetensors: each tensor is read when it is reached (only tensors passing
    ``filter_key`` are read) and owned by the caller; ``.pt``/``.bin``: views of the
    memory-mapped file where torch allows it.
    """
    if is_safetensors(path):
        lazy = open_weights(path)
        for name in _select(lazy, filter_key):
            data = lazy[name]
            arr = np.ascontiguousarray(data.raw())
            if data.dtype is DType.BF16:
                yield name, torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
            else:
                yield name, torch.from_numpy(arr)
        return
    tensors, _ = load_torch_checkpoint(path, map_location)
    for name in _select(tensors, filter_key):
        yield name, tensors[name]


def export_tensors_to_nnef(
    name_to_tensor: Mapping[str, torch.Tensor | np.ndarray],
    output_dir: str | os.PathLike[str],
    *,
    bf16_as: DType | str = "f16",
    progress: bool | None = None,
    sync: bool = False,
) -> dict[str, WrittenTensor]:
    """Write each tensor as a ``.dat`` file in ``output_dir``; returns what was written.

    Files are named by :func:`t2n.serialize.tensors.tensor_file_name`
    (``a.b.weight`` → ``a.b.weight.dat``; other characters ``%XX``-escaped). CPU
    tensors are written from their own memory (no copy); bf16 ones as ``bf16_as``
    (``"f16"`` or ``"f32"``), converted chunk by chunk. All or nothing: on any error
    no file of this call is left. ``progress``: a bar on a terminal (``None``: when
    stderr is one and the write is large), and INFO log records.
    """
    check_tensor_export_args(name_to_tensor, bf16_as=bf16_as, progress=progress, sync=sync)
    data = _named_tensor_data(name_to_tensor, "name_to_tensor")
    return write_tensors(data, output_dir, bf16_as=bf16_as, progress=progress, sync=sync)


def check_tensor_export_args(
    tensors: object = None, *, bf16_as: object, progress: object, sync: object, filter_key: object = None,
) -> None:
    """The arguments of ``export_tensors_to_nnef`` / ``export_tensors_from_disk_to_nnef``,
    checked before anything is read or written."""
    if tensors is not None:
        if not isinstance(tensors, Mapping):
            raise InvalidArgumentError(
                f"name_to_tensor must be a mapping name → tensor (such as model.state_dict()), "
                f"got {type(tensors).__name__}"
            )
        bad = next((k for k in tensors if not isinstance(k, str)), None)
        if bad is not None:
            raise InvalidArgumentError(f"name_to_tensor keys must be strings (tensor names), got {bad!r}")
    bf16_export_dtype(bf16_as)
    if progress is not None and not isinstance(progress, bool):
        raise InvalidArgumentError(f"progress must be None, True or False, got {progress!r}")
    if not isinstance(sync, bool):
        raise InvalidArgumentError(f"sync must be True or False, got {sync!r}")
    if filter_key is not None and not callable(filter_key):
        raise InvalidArgumentError(
            f"filter_key must be a function of the tensor name returning a bool, got {filter_key!r}"
        )


def _named_tensor_data(tensors: Mapping[str, Any], what: str) -> dict[str, TensorData]:
    """IR data of each named tensor (float8 ones converted, with a warning), refusing
    values that are not tensors or arrays by name."""
    out: dict[str, TensorData] = {}
    for name, t in tensors.items():
        if not isinstance(t, (torch.Tensor, np.ndarray, TensorData)):
            raise InvalidArgumentError(
                f"{what}[{name!r}] is a {type(t).__name__}, not a tensor; give only tensors (or numpy arrays)")
        f8 = float8_data(t, str(name)) if isinstance(t, torch.Tensor) and not t.is_meta else None
        out[str(name)] = f8 if f8 is not None else tensor_data(t)
    return out


def export_tensors_from_disk_to_nnef(
    path: str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    filter_key: Callable[[str], bool] | None = None,
    fn_check_found_tensors: Callable[[dict[str, torch.Tensor]], bool | None] | None = None,
    map_location: Any = "cpu",
    *,
    bf16_as: DType | str = "f16",
    progress: bool | None = None,
    sync: bool = False,
) -> dict[str, WrittenTensor]:
    """Write the tensors of a checkpoint file as ``.dat`` files, one at a time.

    ``path``: a ``.safetensors`` file (read lazily), a sharded checkpoint (its
    ``*.safetensors.index.json`` or its folder), or a ``.pt``/``.pth``/``.bin`` file
    (memory-mapped when in torch's zip format). ``filter_key(name) -> bool`` selects
    tensors. ``fn_check_found_tensors`` gets ``{name: tensor}`` of the selected
    tensors **on the meta device** (names, shapes and dtypes, no data) before anything
    is written; returning ``False`` (or raising) stops the export. Peak memory stays
    near one chunk (safetensors) or one tensor (.pt), not the checkpoint's size.
    Returns ``{name: WrittenTensor}``; names map to files as in
    :func:`export_tensors_to_nnef`.
    """
    check_tensor_export_args(bf16_as=bf16_as, progress=progress, sync=sync, filter_key=filter_key)
    bf16_export_dtype(bf16_as)
    source = open_checkpoint(path, map_location)
    names = _select(source, filter_key)
    if fn_check_found_tensors is not None:
        verdict = fn_check_found_tensors({n: _meta_like(source[n]) for n in names})
        if verdict is False:
            raise InvalidArgumentError(
                f"fn_check_found_tensors rejected the {len(names)} tensors found in {path}; nothing was written"
            )
    log.info("exporting %d of %d tensors from %s", len(names), len(source), path)
    return write_tensors([(n, source[n]) for n in names], output_dir, bf16_as=bf16_as,
                         progress=progress, sync=sync)


# -- weights for compile ----------------------------------------------------------------


def weight_source(
    weights_from: str | os.PathLike[str] | Mapping[str, Any], map_location: Any = "cpu"
) -> dict[str, TensorData]:
    """name → data for ``compile(..., weights_from=...)``: a checkpoint path (as for
    :func:`export_tensors_from_disk_to_nnef`) or a mapping of tensors/arrays."""
    if isinstance(weights_from, (str, os.PathLike)):
        return open_checkpoint(weights_from, map_location)
    if isinstance(weights_from, Mapping):
        return _named_tensor_data(weights_from, "weights_from")
    raise InvalidArgumentError(
        f"weights_from must be a checkpoint path or a mapping of tensors, not {type(weights_from).__name__}"
    )


def has_meta_tensors(module: torch.nn.Module) -> bool:
    return any(t.is_meta for t in module.parameters()) or any(t.is_meta for t in module.buffers())


def resolve_weights(
    module: torch.nn.Module,
    source: Mapping[str, TensorData] | None,
    canonical: Mapping[int, str],
) -> dict[str, TensorData]:
    """{canonical name: data} for the parameters and buffers of ``module`` found in
    ``source`` under any of their names (tied weights have several).

    Data whose float dtype differs from the model's is converted lazily (a bf16
    checkpoint into an f32 model). Raises one error listing every tensor on the meta
    device that ``source`` lacks and every shape or dtype that disagrees.
    """
    names, tensors = _tensors_by_identity(module)
    out: dict[str, TensorData] = {}
    missing: list[str] = []
    wrong: list[str] = []
    kinds: list[str] = []
    for key, aliases in names.items():
        t = tensors[key]
        found = next((n for n in aliases if source is not None and n in source), None)
        if found is None or source is None:
            if t.is_meta:
                missing.append(aliases[0])
            continue
        data = source[found]
        want = exported_dtype(t.dtype)
        if tuple(data.shape) != tuple(t.shape):
            wrong.append(f"{found}: shape {list(data.shape)} in the weights, {list(t.shape)} in the model")
            continue
        if data.dtype is not want:
            if not (data.dtype.is_float and want.is_float):
                kinds.append(f"{found}: {data.dtype} in the weights, {want} in the model (dtypes of another kind)")
                continue
            data = converted(data, want)
        out[canonical.get(key, aliases[0])] = data
    if missing or wrong or kinds:
        raise _unusable_weights(missing, wrong, kinds)
    if source is not None:
        log.info("%d parameters/buffers read from weights_from (%d entries there)", len(out), len(source))
    return out


def _tensors_by_identity(module: torch.nn.Module) -> tuple[dict[int, list[str]], dict[int, torch.Tensor]]:
    """Each parameter and buffer of ``module`` once, by identity: every name it has
    (tied weights have several) and the tensor."""
    names: dict[int, list[str]] = {}
    tensors: dict[int, torch.Tensor] = {}
    for name, t in [*module.named_parameters(remove_duplicate=False),
                    *module.named_buffers(remove_duplicate=False)]:
        names.setdefault(id(t), []).append(name)
        tensors[id(t)] = t
    return names, tensors


def _unusable_weights(missing: list[str], wrong: list[str], kinds: list[str]) -> InvalidArgumentError:
    """One error for every tensor that has no usable data, with what to do for each kind."""
    lines = [f"  - {n}: on the meta device and not in weights_from" for n in missing[:50]]
    if len(missing) > 50:
        lines.append(f"  - ... and {len(missing) - 50} more")
    lines += [f"  - {w}" for w in [*wrong, *kinds][:50]]
    advice = []
    if missing:
        advice.append("Give every meta-device tensor through compile(..., weights_from=...) (a "
                      "safetensors file, a .pt/.bin file or a mapping), or materialize it (e.g. "
                      "non-persistent buffers).")
    if wrong:
        advice.append("A shape that differs means the weights are not this model's: check the file.")
    if kinds:
        advice.append("A dtype of another kind (integers or booleans where the model holds floats, "
                      "or the other way round) is not converted (only float dtypes are): save "
                      "those tensors in the model's dtype.")
    return InvalidArgumentError(
        f"{len(missing) + len(wrong) + len(kinds)} parameter(s)/buffer(s) have no usable data:\n"
        + "\n".join(lines) + "\n" + " ".join(advice)
    )


__all__ = [
    "convert_raw_fast", "export_tensors_from_disk_to_nnef", "export_tensors_to_nnef",
    "has_meta_tensors", "iter_torch_tensors_from_disk", "load_torch_checkpoint", "open_checkpoint",
    "resolve_weights", "safetensors_files", "weight_source",
]
