"""Element-wise operations of standard NNEF. The names come from the shared emitters'
table (an IR op written under the same name; tract's own names are read by
:mod:`t2n.backends.tract.reader.elementwise`) and the result types from that IR op's
inference and evaluator: the renderer and the reader agree by construction.
Broadcasting is NNEF's: a lower-rank operand is aligned from the left (trailing unit
axes), and a literal operand takes the other operand's dtype."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from t2n.backends.nnef.emit.elementwise import SAME_NAME
from t2n.backends.nnef.reader.optable import (
    Args,
    Infer,
    InferenceError,
    ReadOpTable,
    TensorVal,
    literal_tensor,
)
from t2n.errors import IRError
from t2n.ir import DType, OpSet, Shape, TensorType
from t2n.ir.schema import InferContext

COMMON = ReadOpTable("elementwise")

BINARY_IR = frozenset(["add", "sub", "mul", "div", "pow", "min", "max", "lt", "gt", "le", "ge", "eq", "ne",
                       "and", "or", "xor", "bitand", "bitor", "bitxor"])


def via_ir(kind: str, operands: Sequence[TensorVal], attrs: Mapping[str, Any] | None = None, *,
           align: bool = True) -> TensorVal:
    """The result of IR op ``kind`` on ``operands`` (ranks aligned NNEF-style first, unless
    not ``align``: an op whose operands are not broadcast)."""
    rank = max((t.rank for t in operands), default=0) if align else 0
    types = tuple(TensorType(t.dtype, Shape(list(t.shape) + [1] * (rank - t.rank)), t.type.quant)
                  for t in operands)
    known = tuple(None if t.known is None else np.asarray(t.known).reshape(types[i].shape)
                  for i, t in enumerate(operands))
    schema = OpSet.default().get(kind)
    a = dict(attrs or {})
    try:
        out = schema.infer(InferContext(types, a, known))[0]
    except (IRError, ValueError, TypeError) as exc:
        raise InferenceError(f"{kind}: {exc}") from None
    value = None
    if schema.evaluate is not None and all(k is not None for k in known) and not out.dtype.is_float:
        try:
            value = np.asarray(schema.evaluate([np.asarray(k) for k in known], a)[0])  # type: ignore[misc]
        except (TypeError, ValueError, ArithmeticError):
            value = None
    return TensorVal(out, value)


def operands(a: Args, *names: str) -> list[TensorVal]:
    """Tensor arguments; literals take the dtype of the first tensor among them."""
    raw = [a.raw(n) for n in names]
    like: DType | None = next((v.dtype for v in raw if isinstance(v, TensorVal)), None)
    return [a.tensor(n, like) for n in names]


def unary(kind: str) -> Infer:
    """The inference of a one-operand operation written from IR op ``kind``."""

    def infer(a: Args) -> list[TensorVal]:
        return [via_ir(kind, operands(a, "x"))]

    return infer


def binary(kind: str) -> Infer:
    """The inference of a two-operand operation written from IR op ``kind``."""

    def infer(a: Args) -> list[TensorVal]:
        return [via_ir(kind, operands(a, "x", "y"))]

    return infer


def add_ir_op(table: ReadOpTable, name: str, kind: str) -> None:
    """``name`` in ``table``, read as IR op ``kind`` (``x, y`` if it is binary, else ``x``)."""
    if kind in BINARY_IR:
        table.op(name, "x, y")(binary(kind))
    else:
        table.op(name, "x")(unary(kind))


_UNARY_ALIASES = {
    "copy": "identity", "rcp": "rcp", "recip": "rcp", "sqr": "square", "square": "square",
    "round": "round", "silu": "silu", "softplus": "softplus",
}
"""NNEF names of IR element-wise ops beyond the emitters' table (aliases, fragments)."""

for _name in SAME_NAME:
    add_ir_op(COMMON, _name, _name)
for _name, _kind in _UNARY_ALIASES.items():
    COMMON.op(_name, "x")(unary(_kind))


@COMMON.op(["rsqr", "softabs", "elu", "selu", "gelu", "leaky_relu"],
           "x, alpha = 1.0, epsilon = 0.0, lambda = 1.0")
def _same_shape(a: Args) -> list[TensorVal]:
    """Activations of the standard library: the input's type."""
    return [a.tensor("x")]


@COMMON.op("prelu", "x, alpha")
def _prelu(a: Args) -> list[TensorVal]:
    x, alpha = operands(a, "x", "alpha")
    return [TensorVal(via_ir("mul", [x, alpha]).type)]


@COMMON.op("select", "condition, true_value, false_value")
def _select(a: Args) -> list[TensorVal]:
    cond = a.tensor("condition", DType.BOOL)
    t, f = operands(a, "true_value", "false_value")
    return [via_ir("select", [cond, t, f])]


@COMMON.op("clamp", "x, a, b")
def _clamp(a: Args) -> list[TensorVal]:
    x, lo, hi = operands(a, "x", "a", "b")
    return [TensorVal(via_ir("min", [via_ir("max", [x, lo]), hi]).type)]


def binary_value(op: str, x: object, y: object) -> TensorVal:
    """A binary operator (``a + b``) on tensors or literals, as its NNEF operation."""
    like = x.dtype if isinstance(x, TensorVal) else (y.dtype if isinstance(y, TensorVal) else None)
    return via_ir(op, [literal_tensor(x, like), literal_tensor(y, like)])
