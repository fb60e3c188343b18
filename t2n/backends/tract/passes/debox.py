"""Nearest upsampling as tract's ``debox``, for a ``TractNNEF`` that asks for it
(``upsample_with_debox``, tract 0.23+), found in the IR by pattern.

Nearest upsampling by integer factors along spatial axes (``reshape(tile(unsqueeze(x)))``
per axis, :mod:`t2n.passes.tile_upsampling`) becomes one ``tract_debox`` op (``debox``: a
transposed convolution with a kernel of ones, whose windows do not overlap, so every
output is one input times one: exact). Matches are rewritten only where every
intermediate value has no other reader. A nearest upsampling of a convolution or matrix
product (directly or through element-wise ops) keeps its form: see ``_FUSED_BY_TRACT``.
"""

from __future__ import annotations

from typing import Any

import attrs

from t2n.backends.tract.ops import with_tract_forms
from t2n.ir import DType, Graph, Op, Trait, Value
from t2n.passes.rewrite import Pattern, PatternPass, only_reader, producer_of
from t2n.passes.tile_upsampling import tile_step

_FLOATS = (DType.F16, DType.F32)

_NEAREST_STEPS = frozenset({"unsqueeze", "tile", "reshape"})

_FUSED_BY_TRACT = frozenset({"conv", "deconv", "matmul"})
"""Layers a ``debox`` may not follow (directly or through element-wise ops): tract
0.23.9 fails to prepare such a model (its optimiser fuses debox's all-one kernel into
the layer's matrix product with the wrong shape); the tile form is kept there."""


def match_nearest(graph: Graph, reshape: Op) -> tuple[Value, tuple[int, ...]] | None:
    """(x, factors by axis) when ``reshape`` ends the frontend's nearest upsampling by an
    integer factor: reshape(tile(unsqueeze(x, axes=[axis + 1]), reps)), reps all one
    but the factor at axis + 1, along a spatial axis (2 or later) of a float tensor.
    An ``x`` that is itself a ``tract_debox`` read only here is merged into one op."""
    step = tile_step(graph, reshape)
    if step is None or step.x.type.dtype not in _FLOATS:
        return None
    x, axis, factor, unsq = step.x, step.axis, step.factor, step.unsqueeze
    factors = [factor if i == axis else 1 for i in range(x.rank)]
    inner = producer_of(x, "tract_debox")
    if inner is not None and only_reader(graph, x, unsq):
        factors = [a * b for a, b in zip(factors, inner.attrs["factors"])]
        x = inner.inputs[0]
    if _after_a_layer(x):
        return None
    return x, tuple(factors)


def _after_a_layer(x: Value) -> bool:
    """``x`` is a convolution or matrix product, possibly through element-wise ops
    (which tract fuses into the layer, with the debox after them) and the tile form of
    an upsampling of another axis."""
    p = x.producer
    while p is not None and (p.has(Trait.ELEMENTWISE) or p.kind in _NEAREST_STEPS):
        computed = [v for v in p.inputs if v.producer is None or not v.producer.has(Trait.CONSTANT_LIKE)]
        if len(computed) != 1:
            return False
        p = computed[0].producer
    return p is not None and p.kind in _FUSED_BY_TRACT


def _debox(graph: Graph, op: Op, found: tuple[Value, tuple[int, ...]]) -> Value:
    x, factors = found
    graph.opset = with_tract_forms(graph.opset)
    return graph.create_op("tract_debox", [x], {"factors": factors}, loc=op.loc, names=["debox"]).output


@attrs.frozen
class DeboxUpsample(PatternPass):
    """Nearest upsampling by an integer factor as ``tract_debox`` ops."""

    name = "debox-upsample"

    def patterns(self) -> list[Pattern[Any]]:
        return [Pattern("upsamplings", match_nearest, _debox)]
