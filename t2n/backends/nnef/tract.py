"""How tract reads literals, as the tract renderer's emission context writes them."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from t2n.backends.nnef.context import EmitContext, Raw, literal
from t2n.backends.nnef.versions import tract_has
from t2n.ir import DType, Value


class TractEmitContext(EmitContext):
    """tract parses float literals as f32, reads integer literals as symbolic dims
    (TDim), and does read ``inf``. Before 0.23 it has no ``copy``."""

    def call(self, op: str, *args: Any, **attrs: Any) -> str:
        """``copy(x)`` is written ``x`` (an assignment of the identifier) where the
        target's tract has no ``copy``; a literal is wrapped in an ``add`` of zero so
        that the line still computes a tensor."""
        if op == "copy" and len(args) == 1 and not attrs and not tract_has(self, "copy"):
            text = super().call("copy", *args)[len("copy("):-1]
            if text.isidentifier() or text.endswith(")"):
                return text
            return f"add({text}, 0)" if text.lstrip("-").isdigit() else f"add({text}, 0.0)"
        return super().call(op, *args, **attrs)

    def scalar_operand(self, v: Value, data: np.ndarray) -> str:
        if v.type.dtype.is_float and math.isnan(float(data.item())):
            return self.materialize(v, data)  # NaN has no literal
        if v.type.dtype is DType.F64 and float(np.float32(np.clip(data, -3e38, 3e38))) != float(data.item()):
            # an f32 literal would lose the f64 digits of 0.1
            return self.materialize(v, data)
        if v.type.dtype.is_int:
            # i64 op TDim gives a TDim that cannot be returned: say which integer type it is.
            return self.call("tract_core_cast", Raw(literal(data.item())), to=v.type.dtype.value)
        return literal(data.item())

    def typed_float(self, value: float, dtype: DType) -> Raw | float:
        """Unlike binary ops, ``select`` does not convert an f32 literal to the other
        branch's type: a literal for another float type is cast."""
        to = self.target.bf16_as if dtype is DType.BF16 else dtype
        if to is DType.F32:
            return value
        return Raw(self.call("tract_core_cast", value, to=to.value))
