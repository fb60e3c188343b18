"""Comparing engine outputs with PyTorch's at named tolerances."""

from __future__ import annotations

import enum
from collections.abc import Sequence

import attrs
import numpy as np


class Tolerance(enum.Enum):
    """How close is close enough: ``|got - expected| <= atol + rtol * |expected|`` per
    element, with (atol, rtol) by dtype family (:meth:`limits`), and a fraction of
    elements allowed outside that (:meth:`outlier_fraction`, zero but for ``super``
    and ``ultra``). Integer and bool outputs are always compared exactly.

    tract's names and values (its ``Approximation`` levels): ``exact``; ``close``
    (1e-7, 1e-7; f16: 1e-3, 1e-3); ``approximate`` (1e-4, 5e-4; f16: 1e-3, 5e-3);
    ``very`` (5e-2, 1e-2); ``super`` (0.1, 0.05, 0.01 % outliers); ``ultra`` (0.2, 0.1,
    0.05 % outliers). t2n's own: ``loose`` (1e-3, 1e-2; f16: 1e-2, 5e-2) and
    ``very_loose`` (0.1, 0.1). t2n counts bf16 with f16 (2-byte floats).
    """

    EXACT = "exact"
    APPROXIMATE = "approximate"
    LOOSE = "loose"
    VERY_LOOSE = "very_loose"
    CLOSE = "close"
    VERY = "very"
    SUPER = "super"
    ULTRA = "ultra"

    def limits(self, dtype: np.dtype) -> tuple[float, float]:
        if self is Tolerance.EXACT or dtype.kind in "biu":
            return 0.0, 0.0
        half = dtype.itemsize <= 2
        return {
            Tolerance.CLOSE: (1e-3, 1e-3) if half else (1e-7, 1e-7),
            Tolerance.APPROXIMATE: (1e-3, 5e-3) if half else (1e-4, 5e-4),
            Tolerance.LOOSE: (1e-2, 5e-2) if half else (1e-3, 1e-2),
            Tolerance.VERY_LOOSE: (1e-1, 1e-1),
            Tolerance.VERY: (5e-2, 1e-2),
            Tolerance.SUPER: (1e-1, 5e-2),
            Tolerance.ULTRA: (2e-1, 1e-1),
        }[self]

    def outlier_fraction(self, dtype: np.dtype) -> float:
        """The fraction of elements that may be off by more than :meth:`limits`."""
        if dtype.kind in "biu":
            return 0.0
        return {Tolerance.SUPER: 1e-4, Tolerance.ULTRA: 5e-4}.get(self, 0.0)

    @classmethod
    def parse(cls, value: object) -> Tolerance:
        """A Tolerance, its name in any case (``"loose"``, ``"VERY_LOOSE"``, ``"super"``),
        or an enum of another exporter whose ``value`` is such a name."""
        if isinstance(value, Tolerance):
            return value
        text = value if isinstance(value, str) else getattr(value, "value", None)
        if isinstance(text, str):
            wanted = text.strip().lower()
            for t in cls:
                if wanted in (t.value, t.name.lower()):
                    return t
        from t2n.errors import InvalidArgumentError

        raise InvalidArgumentError(
            f"tolerance must be a t2n.Tolerance or one of {', '.join(repr(t.value) for t in cls)}; "
            f"got {value!r}"
        )


@attrs.frozen
class OutputReport:
    name: str
    ok: bool
    shape: tuple[int, ...]
    dtype: str
    max_abs: float
    max_rel: float
    mismatched: int
    note: str = ""

    def __str__(self) -> str:
        status = "ok  " if self.ok else "FAIL"
        extra = f" ({self.note})" if self.note else ""
        return (f"{status} {self.name}: {self.dtype}{list(self.shape)} max abs err {self.max_abs:.3g}, "
                f"max rel err {self.max_rel:.3g}, {self.mismatched} elements off{extra}")


@attrs.frozen
class CheckReport:
    engine: str
    tolerance: Tolerance
    outputs: tuple[OutputReport, ...]

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs)

    @property
    def max_abs(self) -> float:
        return max((o.max_abs for o in self.outputs), default=0.0)

    def __str__(self) -> str:
        head = f"{self.engine} vs PyTorch at tolerance '{self.tolerance.value}': " + (
            "all outputs match" if self.ok else "MISMATCH"
        )
        return "\n".join([head, *(f"  {o}" for o in self.outputs)])


def compare_one(name: str, got: np.ndarray, ref: np.ndarray, tol: Tolerance) -> OutputReport:
    got = np.asarray(got)
    ref = np.asarray(ref)
    if got.shape != ref.shape:
        return OutputReport(name, False, tuple(got.shape), str(got.dtype), float("inf"), float("inf"),
                            int(max(got.size, ref.size)), f"shape {list(got.shape)} != expected {list(ref.shape)}")
    fam = {"b": "bool", "i": "int", "u": "int", "f": "float"}
    if fam.get(got.dtype.kind) != fam.get(ref.dtype.kind):
        return OutputReport(name, False, tuple(got.shape), str(got.dtype), float("inf"), float("inf"),
                            int(got.size), f"dtype {got.dtype} but PyTorch gives {ref.dtype}")
    note = "" if got.dtype == ref.dtype else f"dtype {got.dtype}, PyTorch {ref.dtype}"
    if ref.size > 1 and ref.dtype.kind == "f" and bool(np.isnan(ref).all()):
        return OutputReport(name, False, tuple(got.shape), str(got.dtype), float("nan"), float("nan"),
                            int(ref.size), "PyTorch's own output is all NaN: there is nothing meaningful "
                            "to compare (weights holding NaN or infinities?)")
    if got.size == 0:
        return OutputReport(name, True, tuple(got.shape), str(got.dtype), 0.0, 0.0, 0, note)
    atol, rtol = tol.limits(ref.dtype)
    g = got.astype(np.float64)
    r = ref.astype(np.float64)
    same_nan = np.isnan(g) == np.isnan(r)
    both_inf = np.isinf(g) & np.isinf(r) & (np.sign(g) == np.sign(r))
    with np.errstate(invalid="ignore"):
        diff = np.where(np.isnan(g) | np.isnan(r) | both_inf, 0.0, np.abs(g - r))
    close = (diff <= atol + rtol * np.abs(np.where(both_inf | np.isnan(r), 0, r))) & same_nan
    rel = diff / np.maximum(np.abs(r), 1e-30)
    rel = np.where(diff == 0, 0.0, rel)
    off = int((~close).sum())
    return OutputReport(
        name, off <= tol.outlier_fraction(ref.dtype) * got.size, tuple(got.shape), str(got.dtype),
        float(np.max(diff)), float(np.max(rel)), off, note,
    )


def compare(engine: str, names: Sequence[str], got: Sequence[np.ndarray],
            refs: Sequence[np.ndarray], tolerance: Tolerance | str) -> CheckReport:
    tol = Tolerance.parse(tolerance)
    if len(got) != len(refs):
        reports = [OutputReport("(outputs)", False, (), "", float("inf"), float("inf"), 0,
                                f"engine gave {len(got)} outputs, PyTorch {len(refs)}")]
        return CheckReport(engine, tol, tuple(reports))
    return CheckReport(engine, tol, tuple(compare_one(n, g, r, tol) for n, g, r in zip(names, got, refs)))
