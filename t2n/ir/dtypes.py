"""Element types of IR tensors.

The IR names its own dtypes rather than borrowing torch's or numpy's: bf16 has no
numpy dtype, and backends need facts (bits, signedness, NNEF spelling) in one place.
"""

from __future__ import annotations

import enum

import numpy as np


class DType(enum.Enum):
    """An element type. The value is the short name used in IR text and tract."""

    BOOL = "bool"
    U8 = "u8"
    U16 = "u16"
    U32 = "u32"
    U64 = "u64"
    I8 = "i8"
    I16 = "i16"
    I32 = "i32"
    I64 = "i64"
    F16 = "f16"
    BF16 = "bf16"
    F32 = "f32"
    F64 = "f64"

    @property
    def bits(self) -> int:
        return _BITS[self]

    @property
    def itemsize(self) -> int:
        """Bytes per element in memory (bool takes one byte)."""
        return max(1, self.bits // 8)

    @property
    def is_float(self) -> bool:
        return self in (DType.F16, DType.BF16, DType.F32, DType.F64)

    @property
    def is_int(self) -> bool:
        return not self.is_float and self is not DType.BOOL

    @property
    def is_signed(self) -> bool:
        return self.is_float or self in (DType.I8, DType.I16, DType.I32, DType.I64)

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype holding this type's values; bf16 is held as its raw uint16 bits."""
        return np.dtype(_NUMPY[self])

    @classmethod
    def from_numpy(cls, dtype: np.dtype | type) -> DType:
        dt = np.dtype(dtype)
        for member, name in _NUMPY.items():
            if member is not DType.BF16 and np.dtype(name) == dt:
                return member
        raise ValueError(f"no IR dtype for numpy dtype {dt}")

    @classmethod
    def parse(cls, name: str) -> DType:
        try:
            return cls(name)
        except ValueError:
            raise ValueError(f"unknown dtype {name!r}") from None

    def __repr__(self) -> str:
        return f"DType.{self.name}"

    def __str__(self) -> str:
        return self.value


_BITS = {
    DType.BOOL: 1, DType.U8: 8, DType.U16: 16, DType.U32: 32, DType.U64: 64,
    DType.I8: 8, DType.I16: 16, DType.I32: 32, DType.I64: 64,
    DType.F16: 16, DType.BF16: 16, DType.F32: 32, DType.F64: 64,
}

_NUMPY = {
    DType.BOOL: "bool", DType.U8: "uint8", DType.U16: "uint16", DType.U32: "uint32",
    DType.U64: "uint64", DType.I8: "int8", DType.I16: "int16", DType.I32: "int32",
    DType.I64: "int64", DType.F16: "float16", DType.BF16: "uint16", DType.F32: "float32",
    DType.F64: "float64",
}


def bf16_export_dtype(value: object, what: str = "bf16_as") -> DType:
    """The type bf16 tensors are exported as: f16 or f32 (neither tract nor NNEF has
    bf16), given as a ``DType`` or its name."""
    from t2n.errors import InvalidArgumentError

    try:
        dt = DType.parse(value.lower()) if isinstance(value, str) else value
    except ValueError:
        dt = None
    if dt not in (DType.F16, DType.F32):
        raise InvalidArgumentError(
            f"{what} must be 'f16' or 'f32': bf16 tensors are exported as f16 or f32 "
            f"(tract and NNEF have no bf16), got {value!r}")
    assert isinstance(dt, DType)
    return dt
