"""Export bf16 as f16 or f32: neither NNEF nor tract has a bf16 type.

``Bf16As(DType.F16)`` retypes the whole graph: bf16 graph inputs become f16 inputs,
bf16 variables and constants keep a reference to their bf16 data wrapped in a lazy
conversion (:class:`~t2n.ir.tensor_data.ConvertedData`: the conversion happens chunk
by chunk when the ``.dat`` file is written, never as a whole copy), every dtype
attribute that says bf16 (``cast(to=bf16)``, ``zeros(dtype=bf16)``…) says the new
type, and inference then retypes every activation. Afterwards no value in the graph is
bf16.

Numerics: bf16 → f16 is exact for magnitudes in f16's normal range (about 6.1e-5 to
65504); larger values become ±inf and smaller ones lose bits (f16 subnormals). f32
holds every bf16 value exactly. The exported model computes in the new type, so its
intermediate results are rounded to 11 (f16) or 24 (f32) significant bits where
PyTorch rounds them to bf16's 8.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from t2n.errors import InvalidArgumentError
from t2n.ir import DType, Graph, Op
from t2n.ir.tensor_data import TensorData, converted
from t2n.passes.base import Pass, PassResult


def _target(value: Any) -> DType:
    dt = DType.parse(value) if isinstance(value, str) else value
    if dt not in (DType.F16, DType.F32):
        raise InvalidArgumentError(f"bf16 can be exported as f16 or f32, not {value!r}")
    assert isinstance(dt, DType)
    return dt


def _retype_attr(value: Any, to: DType) -> tuple[Any, bool]:
    if value is DType.BF16:
        return to, True
    if isinstance(value, TensorData) and value.dtype is DType.BF16:
        return converted(value, to), True
    if isinstance(value, (list, tuple)):
        items = [_retype_attr(v, to) for v in value]
        if any(changed for _, changed in items):
            return type(value)(v for v, _ in items), True
    return value, False


@attrs.frozen
class Bf16As(Pass):
    """Retype every bf16 input, constant, variable, dtype attribute and activation to ``to``."""

    to: DType = attrs.field(default=DType.F16, converter=_target)

    name = "bf16-as"

    def run(self, graph: Graph) -> PassResult:
        inputs = 0
        for v in graph.inputs:
            if v.type.dtype is DType.BF16:
                graph.set_input_type(v, v.type.with_dtype(self.to))
                inputs += 1
        rewritten = 0
        for op in graph.ops():
            attrs_ = self._retyped_attrs(op)
            if attrs_ is not None:
                graph.replace_op(op, attrs=attrs_)
                rewritten += 1
        retyped = 0
        if inputs or rewritten or any(v.type.dtype is DType.BF16 for v in graph.values()):
            retyped = graph.reinfer()
        left = [v.name for v in graph.values() if v.type.dtype is DType.BF16]
        if left:
            raise InvalidArgumentError(
                f"bf16 values remain after retyping to {self.to}: {', '.join(left[:10])} "
                "(an op's type rule produces bf16 on its own)"
            )
        stats = {"inputs": inputs, "ops_rewritten": rewritten, "values_retyped": retyped}
        return PassResult(graph, bool(inputs or rewritten or retyped), stats)

    def _retyped_attrs(self, op: Op) -> Mapping[str, Any] | None:
        out: dict[str, Any] = {}
        changed = False
        for k, v in op.attrs.items():
            nv, c = _retype_attr(v, self.to)
            out[k] = nv
            changed |= c
        return out if changed else None


__all__ = ["Bf16As"]
