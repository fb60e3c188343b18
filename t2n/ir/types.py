"""Value types of the IR: shapes, quantization info and tensor types (all immutable)."""

from __future__ import annotations

import ast
import math
from collections.abc import Iterable, Mapping

import attrs

from t2n.ir.dims import Dim, Sym, as_dim, dim_symbols, parse_dim, substitute
from t2n.ir.dtypes import DType


class Shape(tuple[Dim, ...]):
    """A tensor shape: a tuple of ``int`` or :class:`Sym`. Never ``-1`` for unknown."""

    __slots__ = ()

    def __new__(cls, dims: Iterable[object] = ()) -> Shape:
        return super().__new__(cls, tuple(as_dim(d) for d in dims))

    @property
    def rank(self) -> int:
        return len(self)

    @property
    def is_static(self) -> bool:
        return not any(isinstance(d, Sym) for d in self)

    @property
    def numel(self) -> Dim:
        out: Dim = 1
        for d in self:
            out = out * d
        return out

    def static_numel(self) -> int:
        if not self.is_static:
            raise ValueError(f"shape {self} is symbolic")
        return math.prod(int(d) for d in self)

    def symbols(self) -> frozenset[str]:
        return dim_symbols(self)

    def substitute(self, bindings: Mapping[str, Dim]) -> Shape:
        return Shape(substitute(d, bindings) for d in self)

    def __str__(self) -> str:
        return "[" + ", ".join(str(d) for d in self) + "]"

    def __repr__(self) -> str:
        return f"Shape({str(self)})"

    @classmethod
    def parse(cls, text: str) -> Shape:
        body = text.strip()[1:-1].strip()
        return cls(parse_dim(p) for p in body.split(",")) if body else cls()


@attrs.frozen
class QuantInfo:
    """Linear quantization of a tensor: ``real = (q - zero_point) * scale``.

    ``axis`` is set for per-channel parameters, in which case ``scale`` and
    ``zero_point`` hold one entry per channel.
    """

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    bits: int = 8
    signed: bool = True
    axis: int | None = None

    def __str__(self) -> str:
        """``qu8<scale, zero_point>`` (``qi8<[scales], [zero points], axis>`` per channel):
        no ``=`` or parentheses, so that IR text lines stay parseable."""
        sc = self.scale[0] if len(self.scale) == 1 else list(self.scale)
        zp = self.zero_point[0] if len(self.zero_point) == 1 else list(self.zero_point)
        ax = "" if self.axis is None else f", {self.axis}"
        sign = "i" if self.signed else "u"
        return f"q{sign}{self.bits}<{sc}, {zp}{ax}>"

    @classmethod
    def parse(cls, text: str) -> QuantInfo:
        """The inverse of ``str``."""
        text = text.strip()
        head, body = text[: text.index("<")], text[text.index("<") + 1 : text.rindex(">")]
        parts = ast.literal_eval(f"({body},)")
        scale, zp = parts[0], parts[1]
        return cls(
            tuple(float(x) for x in (scale if isinstance(scale, list) else [scale])),
            tuple(int(x) for x in (zp if isinstance(zp, list) else [zp])),
            int(head[2:]), head[1] == "i", int(parts[2]) if len(parts) > 2 else None,
        )


@attrs.frozen
class TensorType:
    """dtype + shape (+ optional quantization) of a Value."""

    dtype: DType
    shape: Shape = attrs.field(converter=Shape)
    quant: QuantInfo | None = None

    @property
    def rank(self) -> int:
        return len(self.shape)

    def with_shape(self, shape: Iterable[object]) -> TensorType:
        return attrs.evolve(self, shape=Shape(shape))

    def with_dtype(self, dtype: DType) -> TensorType:
        return attrs.evolve(self, dtype=dtype, quant=None)

    def __str__(self) -> str:
        q = f" {self.quant}" if self.quant is not None else ""
        return f"{self.dtype}{self.shape}{q}"

    @classmethod
    def parse(cls, text: str) -> TensorType:
        text = text.strip()
        i, j = text.index("["), text.index("]") + 1
        rest = text[j:].strip()
        return cls(DType.parse(text[:i]), Shape.parse(text[i:j]), QuantInfo.parse(rest) if rest else None)
