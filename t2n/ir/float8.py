"""8-bit floats, which neither NNEF nor tract can store or compute with.

Weights stored as float8 (parameters, buffers, constants, checkpoint tensors) are
exported in the narrowest type that holds every value of their format exactly:
f16 for the e4m3 and e5m2 formats (their exponent ranges and 2-3 mantissa bits lie
inside f16's, NaN stays NaN and e5m2's infinities stay infinite), f32 for e8m0 (its
exponents reach 2^-127 and 2^127, beyond f16). The conversion is a 256-entry table
built from the bit layout of each format, so it needs no torch and is exact by
construction; the tests compare it with PyTorch's own conversion on all 256 codes.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from t2n.ir.dtypes import DType


@attrs.frozen
class Float8Format:
    """Bit layout of an 8-bit float: ``special`` is how the format spells inf and NaN
    (``"ieee"``: like IEEE 754; ``"fn"``: no inf, NaN is all ones; ``"fnuz"``: no inf
    and no negative zero, NaN is 0x80; ``"e8m0"``: an unsigned exponent, NaN is 0xFF)."""

    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    special: str
    exported_as: DType

    def decode(self, code: int) -> float:
        """The value of one code (0..255)."""
        if self.special == "e8m0":
            return math.nan if code == 0xFF else math.ldexp(1.0, code - self.bias)
        if self.special == "fnuz" and code == 0x80:
            return math.nan
        top = (1 << self.exponent_bits) - 1
        exp = (code >> self.mantissa_bits) & top
        man = code & ((1 << self.mantissa_bits) - 1)
        if self.special == "ieee" and exp == top:
            return math.nan if man else (-math.inf if code >> 7 else math.inf)
        if self.special == "fn" and exp == top and man == (1 << self.mantissa_bits) - 1:
            return math.nan
        frac = man / (1 << self.mantissa_bits)
        value = math.ldexp(frac, 1 - self.bias) if exp == 0 else math.ldexp(1.0 + frac, exp - self.bias)
        return -value if code >> 7 else value


FLOAT8_FORMATS: dict[str, Float8Format] = {
    f.name: f for f in (
        Float8Format("float8_e4m3fn", 4, 3, 7, "fn", DType.F16),
        Float8Format("float8_e5m2", 5, 2, 15, "ieee", DType.F16),
        Float8Format("float8_e4m3fnuz", 4, 3, 8, "fnuz", DType.F16),
        Float8Format("float8_e5m2fnuz", 5, 2, 16, "fnuz", DType.F16),
        Float8Format("float8_e8m0fnu", 8, 0, 127, "e8m0", DType.F32),
    )
}
"""The 8-bit float formats t2n exports, by PyTorch's name."""

_TABLES: dict[str, np.ndarray] = {}


def float8_table(fmt: Float8Format) -> np.ndarray:
    """The value of each of the 256 codes, in ``fmt.exported_as`` (exact)."""
    table = _TABLES.get(fmt.name)
    if table is None:
        with np.errstate(over="raise", under="raise"):
            table = np.array([fmt.decode(c) for c in range(256)], dtype=fmt.exported_as.numpy)
        table.setflags(write=False)
        _TABLES[fmt.name] = table
    return table


def decode_float8(codes: np.ndarray, fmt: Float8Format) -> np.ndarray:
    """float8 codes (any shape, as uint8) as values of ``fmt.exported_as``, same shape."""
    return float8_table(fmt)[np.asarray(codes).view(np.uint8)]


__all__ = ["FLOAT8_FORMATS", "Float8Format", "decode_float8", "float8_table"]
