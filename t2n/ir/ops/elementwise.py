"""Element-wise ops: unary math, activations, binary arithmetic, comparisons, select.

Binary ops broadcast numpy-style and require both operands to share a dtype; the
frontend inserts casts following PyTorch's type promotion.

NaN: ``max``/``min`` (and ``relu``, ``clamp``-like compositions of them) give an
engine-defined result for a NaN operand: the evaluator propagates it, tract returns
the other operand. Lowerings that must follow PyTorch there (``maximum``, ``fmax``…)
guard them with ``is_nan`` and ``select``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from t2n.ir.attributes import BOOL, FLOAT, NO_ATTRS, STR, optional, required
from t2n.ir.dims import Dim, Sym, SymbolicComparisonError, as_dim, decide, sym_max, sym_min
from t2n.ir.dtypes import DType
from t2n.ir.infer_utils import InferError, broadcast_shapes, same_dtype, tensor
from t2n.ir.schema import InferContext, OpSchema, OpTable, Trait
from t2n.ir.types import TensorType

TABLE = OpTable("elementwise")

_EW = frozenset({Trait.PURE, Trait.ELEMENTWISE})
_EW_COMM = _EW | {Trait.COMMUTATIVE}

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.asarray(1.0 / (1.0 + np.exp(-x)))


def _gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return np.asarray(0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3))))
    return np.asarray(0.5 * x * (1.0 + _erf(x / np.sqrt(2.0))))


def _elu(x: np.ndarray, alpha: float, scale: float = 1.0, input_scale: float = 1.0) -> np.ndarray:
    return np.asarray(scale * np.where(x > 0, x, alpha * np.expm1(x * input_scale)))


def _keep(fn: Callable[..., np.ndarray]) -> Callable[[Sequence[np.ndarray], Mapping[str, Any]], list[np.ndarray]]:
    """Wrap a numpy function so the result keeps the first input's dtype."""

    def ev(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> list[np.ndarray]:
        with np.errstate(all="ignore"):
            out = np.asarray(fn(*xs, **attrs))
        # Symbolic sizes (object arrays) stay symbolic, whichever operand holds them.
        return [out if any(x.dtype == object for x in xs) else out.astype(xs[0].dtype)]

    return ev


UNARY: dict[str, Callable[..., np.ndarray]] = {
    "neg": np.negative, "abs": np.abs, "sign": np.sign, "square": np.square,
    "exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "log2": np.log2,
    "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "rcp": lambda x: 1.0 / x,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc, "erf": _erf,
    "sigmoid": _sigmoid, "relu": lambda x: np.maximum(x, 0),
    "silu": lambda x: x * _sigmoid(x),
    "softplus": lambda x: np.logaddexp(0.0, x),
    "hard_swish": lambda x: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0,
}
"""Unary ops on numbers; ``round`` rounds half to even, as PyTorch does; ``sign`` of
NaN is NaN (PyTorch's 0 is a lowering's job)."""


def _same(ctx: InferContext) -> list[TensorType]:
    return [ctx.types[0]]


for _name, _fn in UNARY.items():
    TABLE.add(OpSchema(_name, _same, _keep(_fn), _EW, attrs=NO_ATTRS))

TABLE.add(OpSchema("gelu", _same, _keep(lambda x, approximate: _gelu(x, approximate)), _EW,
                   doc="GELU; attr approximate is 'none' (erf) or 'tanh'.",
                   attrs={"approximate": required(STR)}))
TABLE.add(OpSchema("leaky_relu", _same, _keep(lambda x, alpha: np.where(x >= 0, x, x * alpha)), _EW,
                   doc="x if x >= 0 else alpha * x (attr alpha).", attrs={"alpha": required(FLOAT)}))
TABLE.add(OpSchema("elu", _same, _keep(_elu), _EW,
                   doc="scale * (x if x > 0 else alpha * (exp(input_scale * x) - 1)); attrs "
                       "alpha, and optional scale and input_scale (default 1): PyTorch's elu, "
                       "which also expresses selu and celu.",
                   attrs={"alpha": required(FLOAT), "scale": optional(FLOAT, 1.0),
                          "input_scale": optional(FLOAT, 1.0)}))


def _bool_out(ctx: InferContext) -> list[TensorType]:
    same_dtype(ctx, "comparison")
    return [tensor(DType.BOOL, broadcast_shapes(*(t.shape for t in ctx.types)))]


def _binary(ctx: InferContext) -> list[TensorType]:
    dtype = same_dtype(ctx, "binary op")
    return [tensor(dtype, broadcast_shapes(*(t.shape for t in ctx.types)))]


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero (C and tract semantics)."""
    q = np.abs(a) // np.abs(b)
    return np.asarray(np.where((a < 0) != (b < 0), -q, q))


def _sym_trunc_div(a: Dim, b: Dim) -> Dim:
    """Truncating division of sizes: the floor division where the numerator is provably
    non-negative and the divisor positive (else the sign is unknown: undecidable)."""
    if not isinstance(a, Sym) and not isinstance(b, Sym):
        q = abs(int(a)) // abs(int(b))
        return -q if (int(a) < 0) != (int(b) < 0) else q
    if decide("ge", a, 0) and decide("gt", b, 0):
        return a // b
    raise SymbolicComparisonError(f"the sign of {a} / {b} is not known")


def _on_dims(fn: Callable[[Dim, Dim], Dim]) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``fn`` element by element over arrays of sizes (object arrays holding symbols)."""

    def apply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.broadcast_arrays(np.asarray(a, dtype=object), np.asarray(b, dtype=object))
        out = np.empty(a.shape, dtype=object)
        for i in np.ndindex(a.shape):
            out[i] = fn(as_dim(a[i]), as_dim(b[i]))
        return out

    return apply


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype == object or b.dtype == object:
        return _on_dims(_sym_trunc_div)(a, b)
    if np.issubdtype(a.dtype, np.integer):
        return _int_div(a, b)
    return np.asarray(a / b)


def _floor_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype == object or b.dtype == object:
        return _on_dims(lambda x, y: x // y)(a, b)
    if np.issubdtype(a.dtype, np.integer):
        return np.asarray(np.floor_divide(a, b))
    return np.asarray(np.floor(a / b))


def _extreme(fn: Callable[..., np.ndarray], sym: Callable[..., Dim]) -> Callable[..., np.ndarray]:
    def apply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.dtype == object or b.dtype == object:
            return _on_dims(sym)(a, b)
        return np.asarray(fn(a, b))

    return apply


BINARY: dict[str, tuple[Callable[..., np.ndarray], frozenset[Trait]]] = {
    "add": (np.add, _EW_COMM), "sub": (np.subtract, _EW), "mul": (np.multiply, _EW_COMM),
    "div": (_div, _EW), "floor_div": (_floor_div, _EW), "pow": (np.power, _EW),
    "atan2": (np.arctan2, _EW),
    "min": (_extreme(np.minimum, sym_min), _EW_COMM), "max": (_extreme(np.maximum, sym_max), _EW_COMM),
    "and": (np.logical_and, _EW_COMM), "or": (np.logical_or, _EW_COMM),
    "xor": (np.logical_xor, _EW_COMM),
}
"""Binary ops; ``div`` on integers truncates toward zero, ``floor_div`` rounds toward
-inf (PyTorch's ``//`` and ``rounding_mode='floor'``); ``atan2(y, x)``. On sizes
(symbolic known values) they follow :mod:`t2n.ir.dims`."""

COMPARE: dict[str, Callable[..., np.ndarray]] = {
    "lt": np.less, "gt": np.greater, "le": np.less_equal, "ge": np.greater_equal,
    "eq": np.equal, "ne": np.not_equal,
}

for _name, (_fn, _traits) in BINARY.items():
    TABLE.add(OpSchema(_name, _binary, _keep(_fn), _traits, attrs=NO_ATTRS))


def _compare_eval(name: str, fn: Callable[..., np.ndarray]) -> Callable[[Sequence[np.ndarray], Mapping[str, Any]], list[np.ndarray]]:
    """Comparisons of sizes are settled for every size the symbols may take, or raise
    (the value is then unknown): ``Sym`` equality is structural, not numeric."""

    def ev(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
        if any(x.dtype == object for x in xs):
            return [_on_dims(lambda p, q: decide(name, p, q))(*xs).astype(bool)]
        return [np.asarray(fn(*xs))]

    return ev


for _name, _fn in COMPARE.items():
    TABLE.add(OpSchema(_name, _bool_out, _compare_eval(_name, _fn), _EW, attrs=NO_ATTRS))


def _bits(ctx: InferContext) -> list[TensorType]:
    out = _binary(ctx) if len(ctx.types) > 1 else [ctx.types[0]]
    if out[0].dtype.is_float:
        raise InferError("bitwise ops need integer or bool operands")
    return out


BITWISE: dict[str, Callable[..., np.ndarray]] = {
    "bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor,
}
"""Bitwise ops on integers (two's complement) or bools."""

for _name, _fn in BITWISE.items():
    TABLE.add(OpSchema(_name, _bits, _keep(_fn), _EW_COMM, attrs=NO_ATTRS))
TABLE.add(OpSchema("bitnot", _bits, _keep(np.invert), _EW, doc="Bitwise not (logical not on bools).",
                   attrs=NO_ATTRS))


def _float_to_bool(ctx: InferContext) -> list[TensorType]:
    if not ctx.types[0].dtype.is_float:
        raise InferError("is_nan/is_inf: operand must be floating point")
    return [ctx.types[0].with_dtype(DType.BOOL)]


def _is_inf(x: np.ndarray, detect_positive: bool = True, detect_negative: bool = True) -> np.ndarray:
    return np.asarray(np.isinf(x) & (((x > 0) & detect_positive) | ((x < 0) & detect_negative)))


TABLE.add(OpSchema("is_nan", _float_to_bool, lambda xs, a: [np.isnan(xs[0])], _EW, doc="x is NaN.",
                   attrs=NO_ATTRS))
TABLE.add(OpSchema("is_inf", _float_to_bool, lambda xs, a: [_is_inf(xs[0], **a)], _EW,
                   doc="x is infinite; attrs detect_positive and detect_negative (default true).",
                   attrs={"detect_positive": optional(BOOL, True), "detect_negative": optional(BOOL, True)}))


@TABLE.op("not", evaluate=lambda xs, a: [np.logical_not(xs[0])], traits=_EW, attrs=NO_ATTRS)
def _not(ctx: InferContext) -> list[TensorType]:
    if ctx.types[0].dtype is not DType.BOOL:
        raise InferError("not: operand must be bool")
    return [ctx.types[0]]


@TABLE.op("select", evaluate=lambda xs, a: [np.where(xs[0], xs[1], xs[2])], traits=_EW, attrs=NO_ATTRS)
def _select(ctx: InferContext) -> list[TensorType]:
    """where(cond, a, b): cond is bool, a and b share a dtype."""
    cond, a, b = ctx.types
    if cond.dtype is not DType.BOOL:
        raise InferError("select: condition must be bool")
    if a.dtype is not b.dtype:
        raise InferError(f"select: branches differ in dtype ({a.dtype} vs {b.dtype})")
    return [tensor(a.dtype, broadcast_shapes(cond.shape, a.shape, b.shape))]
