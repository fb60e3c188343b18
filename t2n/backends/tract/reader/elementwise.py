"""tract's element-wise operations: those its emitters write an IR op as
(``TRACT_NAMES``, the activations it fuses) read as that IR op."""

from __future__ import annotations

from t2n.backends.nnef.reader.infer_elementwise import add_ir_op, operands, unary, via_ir
from t2n.backends.nnef.reader.optable import Args, ReadOpTable, TensorVal
from t2n.backends.tract.emit.elementwise import TRACT_NAMES

TRACT = ReadOpTable("elementwise/tract")

for _kind, _name in TRACT_NAMES.items():
    add_ir_op(TRACT, _name, _kind)

_UNARY_ALIASES = {
    "tract_transformers_silu": "silu", "tract_core_hard_swish": "hard_swish", "tract_core_silu": "silu",
    "tract_core_is_nan": "is_nan",
}
"""tract operations that are an IR element-wise op under another name."""

for _name, _kind in _UNARY_ALIASES.items():
    TRACT.op(_name, "x")(unary(_kind))


@TRACT.op(["tract_core_gelu_approx", "tract_transformers_gelu_approx", "tract_core_pow_const"],
          "input, fast_impl = false, exponent = 1.0")
def _same_shape(a: Args) -> list[TensorVal]:
    """tract's activations: the input's type."""
    return [a.tensor("input")]


@TRACT.op("tract_core_is_inf", "input, detect_positive = true, detect_negative = true")
def _is_inf(a: Args) -> list[TensorVal]:
    return [via_ir("is_inf", [a.tensor("input")])]


@TRACT.op(["tract_shl", "tract_shr"], "x, y")
def _shift(a: Args) -> list[TensorVal]:
    x, y = operands(a, "x", "y")
    return [TensorVal(via_ir("add", [x, y]).type)]
