"""The checks behind :mod:`t2n.serialize.guarded` for a model's PyTorch tensors.

``compile`` ends by wrapping each tensor of the artifact so that ``save`` and
``check`` refuse to write it once a weight the graph was lowered from has changed: a
tensor is unchanged while its version counter (moved by every in-place op, including
``load_state_dict``'s copies) and a fingerprint of sampled elements (which catches
writes through ``.data`` or a numpy view, invisible to the counter) are what they were
at the end of ``compile``.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Mapping, Sequence

import attrs
import numpy as np
import torch

from t2n.backends.nnef.context import TensorFile
from t2n.errors import InvalidArgumentError
from t2n.frontend.context import array_data
from t2n.frontend.unsupported import UnsupportedHere
from t2n.ir import ArrayData, TensorData
from t2n.ir.tensor_data import ConvertedData
from t2n.quant.q4_0 import Q40Data
from t2n.serialize.guarded import Check, GuardedArrayData, WeightGuards, fingerprint


def _unchanged(t: torch.Tensor, view: np.ndarray, version: int, sample: bytes) -> bool:
    return t._version == version and fingerprint(view) == sample


def unchanged_check(t: torch.Tensor) -> Check | None:
    """A check that ``t`` still holds what it holds now (None for tensors without data
    in memory, e.g. on the meta device)."""
    if t.is_meta or t.device.type != "cpu" or t.layout != torch.strided or t.is_quantized:
        return None
    try:
        view = array_data(t).array
    except (InvalidArgumentError, UnsupportedHere):  # a dtype with no NNEF form (complex): not written as is
        return None
    return functools.partial(_unchanged, t, view, t._version, fingerprint(view))


class _MemoryIndex:
    """Which model tensor's memory an address lies in."""

    def __init__(self, checks: Mapping[str, tuple[torch.Tensor, Check]]) -> None:
        spans = []
        for t, check in checks.values():
            storage = t.untyped_storage()
            if storage.data_ptr():
                spans.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes(), check))
        spans.sort(key=lambda s: s[0])
        self.spans = spans
        self.starts = [s[0] for s in spans]

    def owner(self, addr: int) -> Check | None:
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0 and addr < self.spans[i][1]:
            return self.spans[i][2]
        return None


def guarded_tensors(tensors: Sequence[TensorFile], sources: Mapping[str, torch.Tensor]) -> list[TensorFile]:
    """``tensors`` (in the order they are written), each read through a check that the
    model tensors ``sources`` (name → tensor the graph was lowered from) are unchanged."""
    checks: dict[str, tuple[torch.Tensor, Check]] = {}
    for name, t in sources.items():
        check = unchanged_check(t)
        if check is not None:
            checks[name] = (t, check)
    if not checks:
        return list(tensors)
    guards = WeightGuards([(name, check) for name, (_, check) in checks.items()])
    index = _MemoryIndex(checks)
    out: list[TensorFile] = []
    first = True
    for tf in tensors:
        data: TensorData = tf.data
        inner = data.source if isinstance(data, ConvertedData) else data
        blocks = inner if isinstance(inner, Q40Data) else None  # a Q4_0 weight: guard its values
        if blocks is not None:
            inner = blocks.source
        if type(inner) is ArrayData and not inner.is_symbolic:
            own = index.owner(inner.array.__array_interface__["data"][0])
            guarded: TensorData = GuardedArrayData(inner, guards, own, first)
            first = False
            if blocks is not None:
                guarded = Q40Data(guarded, blocks.scales, blocks.name)
            data = ConvertedData(guarded, data.dtype) if isinstance(data, ConvertedData) else guarded
            tf = attrs.evolve(tf, data=data)
        out.append(tf)
    return out


__all__ = ["guarded_tensors", "unchanged_check"]
