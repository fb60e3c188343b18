"""``force-linear-accumulation-in-f32``: products accumulated in f32.

Each ``matmul`` (``linear`` when one operand is a model constant), ``conv`` and
``deconv`` that computes in a reduced type becomes one region, with the bias ``add``
that follows it when the bias is a model constant: operands cast up, the sum of
products and the bias in f32, the result cast back to the model's type once (as
PyTorch's ``addmm`` and convolutions accumulate f16 in f32).
"""

from __future__ import annotations

import attrs

from t2n.ir import Graph, Op, Value
from t2n.passes.precision.base import ForceF32Pass
from t2n.passes.precision.regions import Region, input_dependent, sole_user

_PRODUCTS = ("matmul", "conv", "deconv")


def _label(op: Op, dynamic: set[Value]) -> str:
    if op.kind == "matmul" and any(v not in dynamic for v in op.inputs):
        return "linear"
    return op.kind


def _bias_after(graph: Graph, op: Op, dynamic: set[Value]) -> list[Op]:
    add = sole_user(graph, op.output)
    if add is None or add.kind != "add" or add.output.type.shape != op.output.type.shape:
        return []
    other = [v for v in add.inputs if v is not op.output]
    return [add] if len(other) == 1 and other[0] not in dynamic else []


@attrs.frozen
class ForceLinearAccumulationInF32(ForceF32Pass):
    """Accumulate every matmul, linear, conv and deconv in f32 (with its bias)."""

    name = "force-linear-accumulation-in-f32"

    def find(self, graph: Graph) -> list[Region]:
        dynamic = input_dependent(graph)
        return [Region((op, *_bias_after(graph, op, dynamic)), _label(op, dynamic))
                for op in graph.ops() if op.kind in _PRODUCTS]


__all__ = ["ForceLinearAccumulationInF32"]
