"""Complex tensors during lowering.

NNEF and the IR have no complex dtype; tract's FFT operators take complex numbers as a
trailing axis of 2 (real, imaginary). So the lowering stands a complex PyTorch tensor
of shape ``S`` for a :class:`Complex`: a real IR value of shape ``S + [2]``. Rules that
take complex tensors (``frontend/lowering/complex.py``, ``spectral.py``) see
``Complex`` arguments and work on the pair; the logical shape, rank and axes are those
of PyTorch's tensor. A ``Complex`` never reaches the IR's graph outputs: a model
returns ``torch.view_as_real(z)`` (or ``z.abs()``...) instead.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from t2n.ir import Builder, Dim, DType, Value

COMPLEX_OUTPUT = ("the model returns a complex tensor, and NNEF has no complex type: return "
                  "torch.view_as_real(z) (real and imaginary parts on a last axis of 2), or z.abs(), "
                  "z.real... instead")


@attrs.frozen(eq=False)
class Complex:
    """A complex tensor: ``pair`` holds its real and imaginary parts on a last axis of 2."""

    pair: Value

    @property
    def rank(self) -> int:
        return self.pair.rank - 1

    @property
    def shape(self) -> tuple[Dim, ...]:
        return tuple(self.pair.type.shape[:-1])

    @property
    def dtype(self) -> DType:
        return self.pair.type.dtype


def holds_complex(x: Any) -> bool:
    """Whether ``x`` (a lowered argument, possibly a list) is or holds a complex tensor."""
    if isinstance(x, Complex):
        return True
    if isinstance(x, (list, tuple)):
        return any(holds_complex(v) for v in x)
    return isinstance(x, complex)


def part(b: Builder, z: Complex, index: int) -> Value:
    """The real (0) or imaginary (1) part of ``z``."""
    r = z.rank
    piece = b.op("slice", z.pair, b.ints([index]), b.ints([index + 1]), axes=(r,), steps=(1,))
    return b.op("squeeze", piece, axes=(r,))


def from_parts(b: Builder, re: Value, im: Value) -> Complex:
    """The complex tensor ``re + i im`` (the two broadcast together)."""
    if tuple(re.type.shape) != tuple(im.type.shape):
        re, im = b.op("add", re, b.op("mul", im, zero(b, im))), b.op("add", im, b.op("mul", re, zero(b, re)))
    r = re.rank
    return Complex(b.op("concat", b.op("unsqueeze", re, axes=(r,)), b.op("unsqueeze", im, axes=(r,)), axis=r))


def zero(b: Builder, like: Value) -> Value:
    return b.const(np.zeros((), like.type.dtype.numpy), like.type.dtype)


def of_real(b: Builder, x: Value) -> Complex:
    """A real tensor as a complex one (imaginary parts zero)."""
    r = x.rank
    lifted = b.op("unsqueeze", x, axes=(r,))
    return Complex(b.op("pad", lifted, pads=((0, 0),) * r + ((0, 1),), mode="constant", value=0.0))


def constant(b: Builder, value: complex, dtype: DType) -> Complex:
    """A Python number as a 0-d complex constant."""
    return Complex(b.const(np.asarray([value.real, value.imag], dtype.numpy), dtype))


def conjugate(b: Builder, z: Complex) -> Complex:
    return Complex(b.op("mul", z.pair, b.const(np.asarray([1.0, -1.0], z.dtype.numpy), z.dtype)))


def scaled(b: Builder, z: Complex, factor: float) -> Complex:
    if factor == 1.0:
        return z
    return Complex(b.op("mul", z.pair, b.const(np.asarray(factor, z.dtype.numpy), z.dtype)))


# -- rule helpers (a rule's context is typed loosely: this module sits below the lowering) --

def complex_arg(ctx: Any, key: int | str) -> Complex:
    """Argument ``key`` of a rule, which must be complex (else the rule's typed refusal)."""
    x = ctx.raw(key)
    if not isinstance(x, Complex):
        raise ctx.unsupported(f"{ctx.kind}: argument {key} was expected to be complex")
    return x


def as_pair(ctx: Any, x: Any, dtype: DType) -> Value:
    """An operand as a (re, im) pair of ``dtype``: a real one gets zero imaginary parts."""
    if isinstance(x, Complex):
        return x.pair if x.dtype is dtype else ctx.b.cast(x.pair, dtype)
    if isinstance(x, complex):
        return constant(ctx.b, x, dtype).pair
    return of_real(ctx.b, ctx.as_value(x, dtype)).pair


def parts_dtype(xs: list[Any]) -> DType:
    """f64 parts when a complex operand is complex128 (PyTorch's promotion), else f32."""
    return DType.F64 if any(isinstance(x, Complex) and x.dtype is DType.F64 for x in xs) else DType.F32


def complex_shape(b: Builder, z: Complex) -> Value:
    """The complex tensor's shape (its pair's, the (re, im) axis left out), read from the graph."""
    return b.op("slice", b.op("shape_of", z.pair), b.ints([0]), b.ints([z.rank]), axes=(0,), steps=(1,))
