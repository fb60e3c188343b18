"""Tensors of a GGUF file (llama.cpp's format) as t2n tensor data, for
``t2n.export_tensors_to_nnef``: ``Q4_0`` tensors keep their blocks byte for byte
(GGUF's ``block_q4_0`` is tract's Q4_0 block: an f16 scale, then byte ``j`` holding
element ``j`` in its low nibble and ``j + 16`` in its high one), so they are written
without re-quantizing; ``F32`` and ``F16`` tensors are written as they are. The file is
memory-mapped: nothing is read before it is written. Needs the optional ``gguf``
package (``pip install t2n[gguf]``).

GGUF lists a tensor's dimensions innermost first; the shapes here are numpy's (and
PyTorch's) order, so a llama.cpp linear weight is ``[out_features, in_features]``.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import numpy as np

from t2n.errors import CorruptTensorFileError, InvalidArgumentError
from t2n.ir import ArrayData, TensorData
from t2n.quant.q4_0 import BLOCK_BYTES, Q40Blocks


def _gguf() -> Any:
    try:
        gguf = importlib.import_module("gguf")
    except ImportError as exc:
        raise InvalidArgumentError(
            "reading GGUF files needs the 'gguf' package: pip install 't2n[gguf]'") from exc
    return gguf


def gguf_tensors(path: str | os.PathLike[str]) -> dict[str, TensorData]:
    """Every tensor of the GGUF file at ``path``, by its GGUF name: ``Q4_0`` ones as
    Q4_0 blocks (copied as they are), ``F32``/``F16`` ones as floats. Any other type is
    refused with :class:`InvalidArgumentError` naming the tensor and its type (nothing is
    written); a file gguf cannot parse is a :class:`CorruptTensorFileError`."""
    gguf = _gguf()
    kinds = gguf.GGMLQuantizationType
    try:
        reader = gguf.GGUFReader(os.fspath(path))
    except (ValueError, OSError, KeyError) as exc:
        raise CorruptTensorFileError(f"{os.fspath(path)}: not a readable GGUF file ({exc})") from exc
    if reader.byte_order != "I":
        raise InvalidArgumentError(f"{os.fspath(path)}: a GGUF file of the other byte order; "
                                   f"convert it to little-endian first")
    out: dict[str, TensorData] = {}
    for t in reader.tensors:
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))
        kind = kinds(t.tensor_type)
        if kind == kinds.Q4_0:
            blocks = np.asarray(t.data).reshape(-1).view(np.uint8)
            if blocks.size % BLOCK_BYTES:
                raise CorruptTensorFileError(f"{os.fspath(path)}: tensor {t.name!r} has a partial Q4_0 block")
            out[t.name] = Q40Blocks(blocks, shape, t.name)
        elif kind in (kinds.F32, kinds.F16):
            out[t.name] = ArrayData(np.asarray(t.data).reshape(shape))
        else:
            raise InvalidArgumentError(
                f"{os.fspath(path)}: tensor {t.name!r} is {kind.name}; t2n writes GGUF tensors of "
                f"types Q4_0, F32 and F16 (tract has no block type for the others)")
    return out


__all__ = ["gguf_tensors"]
