"""Weights that make a model meaningless: NaN or infinite values, or finite values that
become infinite in the dtype they are written in (beyond f16's range in an f16 artifact).

One such weight is enough for every output to be NaN, and a check then compares NaN
with NaN. ``compile`` scans the model's parameters and buffers that the artifact holds
(in memory; weights read from files while writing are not read twice for this, and
constants the graph computes, such as a ``-inf`` mask fill, are the model's intent)
with one reduction each, and counts only in a tensor found to hold such values.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
import numpy as np

from t2n.errors import NonFiniteWeightError
from t2n.ir import ArrayData, DType, TensorData
from t2n.ir.tensor_data import ConvertedData
from t2n.quant.q4_0 import Q40Data


class NonFiniteWeightWarning(UserWarning):
    """Weights of the artifact hold NaN or infinite values (``compile(strict=True)``
    refuses them with :class:`~t2n.errors.NonFiniteWeightError`)."""


F16_INFINITE_FROM = 65520.0
"""The smallest magnitude that f16 rounds to infinity."""

_BITS: dict[DType, tuple[Any, Any, int, int]] = {
    DType.F16: (np.int16, np.uint16, 0x7C00, 0xFC00),
    DType.BF16: (np.int16, np.uint16, 0x7F80, 0xFF80),
}
"""Half floats seen as integers: (signed view, unsigned view, first positive and first
negative bit pattern that is not finite). A non-finite value shows as a maximum of one
view at or above its threshold (IEEE bit patterns grow with the magnitude)."""

_BF16_F16_OVERFLOW = (0x4780, 0xC780)
"""bf16 bit patterns from which the value is beyond f16's range."""

COUNT_BLOCK = 1 << 20


@attrs.frozen
class NonFinite:
    """What one tensor holds that makes it meaningless."""

    name: str
    size: int
    nan: int
    inf: int
    overflow: int = 0
    written: DType = DType.F32

    def __str__(self) -> str:
        parts = [f"{self.nan} NaN" if self.nan else "", f"{self.inf} infinite" if self.inf else "",
                 f"{self.overflow} beyond {self.written}'s range (infinite once written as {self.written})"
                 if self.overflow else ""]
        return f"'{self.name}': {', '.join(p for p in parts if p)} of {self.size} values"


def _in_memory(data: TensorData) -> tuple[np.ndarray, DType] | None:
    """The array holding ``data``'s values and their dtype, when they are in memory."""
    if isinstance(data, Q40Data):
        data = data.source
    if isinstance(data, ConvertedData):
        data = data.source
    if type(data) is not ArrayData and not isinstance(data, ArrayData):
        return None
    if data.is_symbolic or not data.dtype.is_float or data.array.size == 0:
        return None
    return data.array, data.dtype


def _suspect(a: np.ndarray, dtype: DType, written: DType) -> bool:
    """One reduction (two for half floats, or for a conversion to f16): whether ``a``
    may hold a value that is not finite once written as ``written``."""
    to_f16 = written is DType.F16 and dtype is not DType.F16
    if dtype in _BITS:
        signed, unsigned, pos, neg = _BITS[dtype]
        if to_f16:  # bf16 → f16
            pos, neg = _BF16_F16_OVERFLOW
        return bool(a.view(signed).max() >= pos or a.view(unsigned).max() >= neg)
    if to_f16:
        return not (abs(float(a.max())) < F16_INFINITE_FROM and abs(float(a.min())) < F16_INFINITE_FROM)
    with np.errstate(over="ignore", invalid="ignore"):
        return not np.isfinite(a.sum())  # NaN and infinities carry through a sum


def _values(block: np.ndarray, dtype: DType) -> np.ndarray:
    if dtype is DType.BF16:
        return (block.astype(np.uint32) << 16).view(np.float32)
    return block


def count(a: np.ndarray, dtype: DType, written: DType) -> tuple[int, int, int]:
    """(NaN, infinite, beyond the written dtype's range) values of ``a``, block by block."""
    flat = a.reshape(-1)
    nan = inf = over = 0
    to_f16 = written is DType.F16 and dtype is not DType.F16
    for at in range(0, flat.size, COUNT_BLOCK):
        v = _values(flat[at:at + COUNT_BLOCK], dtype)
        nan += int(np.count_nonzero(np.isnan(v)))
        inf += int(np.count_nonzero(np.isinf(v)))
        if to_f16:
            with np.errstate(invalid="ignore"):
                over += int(np.count_nonzero(np.isfinite(v) & (np.abs(v) >= F16_INFINITE_FROM)))
    return nan, inf, over


def nonfinite_tensors(tensors: Iterable[tuple[str, TensorData, DType]], *,
                      infinities: Callable[[str], bool] = lambda name: True) -> list[NonFinite]:
    """Each tensor (name, data, dtype written) in memory that holds values that are not
    finite once written. Infinities count only where ``infinities(name)`` says (a
    buffer may hold a ``-inf`` mask on purpose; NaN always counts)."""
    found = []
    for name, data, written in tensors:
        held = _in_memory(data)
        if held is None:
            continue
        a, dtype = held
        if _suspect(a, dtype, written):
            nan, inf, over = count(a, dtype, written)
            if not infinities(name):
                inf = 0
            if nan or inf or over:
                found.append(NonFinite(name, int(a.size), nan, inf, over, written))
    return found


ADVICE = ("the artifact would compute NaN or infinities from them (and a check would compare "
          "PyTorch's NaN with the engine's); fix the weights (or the checkpoint) first")


def report_nonfinite(found: Sequence[NonFinite], *, strict: bool) -> None:
    """Warn, naming every tensor and its counts, or raise with all of them when ``strict``."""
    if not found:
        return
    shown = found[:20]
    listing = "\n".join(f"  - {f}" for f in shown) + (f"\n  and {len(found) - 20} more" if len(found) > 20 else "")
    head = f"{len(found)} weight tensor(s) hold values that are not finite"
    if strict:
        raise NonFiniteWeightError(f"{head} (strict=True); nothing was written:\n{listing}\n{ADVICE}",
                                   [f.name for f in found])
    filename, lineno = _caller()
    warnings.warn_explicit(f"{head}:\n{listing}\n{ADVICE}", NonFiniteWeightWarning, filename, lineno)


def _caller() -> tuple[str, int]:
    """The first frame outside t2n (where the user called it), for the warning."""
    import os
    import sys

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package + os.sep):
        frame = frame.f_back  # type: ignore[assignment]
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("<t2n>", 0)


__all__ = ["NonFinite", "NonFiniteWeightWarning", "count", "nonfinite_tensors", "report_nonfinite"]
