"""Nearest upsampling by integer factors as one ``nearest_upsample`` op, for tract 0.23.9.

The frontend writes nearest upsampling by an integer factor as
``reshape(tile(unsqueeze(x)))``, one axis at a time (:mod:`t2n.passes.tile_upsampling`).
tract 0.23.9 loads NNEF's ``nearest_upsample`` as its own resize op and runs it as one
kernel (``NearestUpsample``): the op its ONNX loader builds for a ``Resize`` by integer
scales, and what it writes back when it saves such a model as NNEF. Every output is one
input (bit-exact); a dynamic axis stays dynamic.

The rule, from the artifact-speed grid (``python -m benchmarks.artifact_speed --grid
--cases nearest``; benchmarks/RESULTS_ARTIFACT_SPEED.md): in tract 0.23.9 this op runs
at the ONNX path's speed in every cell, 1-D, 2-D and 3-D, factors 2 to 4, 1 to 256
channels, 8 to 512 wide, batch 1 and 8, with a convolution in front or not, where the
ones-kernel deconv it replaces ran up to 13x slower than the ONNX path (32 channels,
128², x2: 11.5 against 0.89 ms under load, 1.25 against 0.29 ms on a quiet machine) and
the tile form up to 47x. So it is taken for every float nearest upsampling by integer
factors, with no condition on shape. Older tract keeps the deconv form
(:mod:`t2n.passes.nearest_deconv`): tract 0.23.3 and 0.23.5 load ``nearest_upsample``
but run it ~400x slower (240 against 0.5 ms at 32 x 128², x2), and 0.23.0 cannot load it.
"""

from __future__ import annotations

import attrs

from t2n.ir import DType, Graph, Op, Value
from t2n.passes.base import Pass, PassResult
from t2n.passes.matching import first_match, only_reader, producer_of, take_place
from t2n.passes.tile_upsampling import tile_step

_FLOATS = frozenset({DType.F16, DType.F32, DType.F64})


def match(graph: Graph, reshape: Op) -> tuple[Value, list[int]] | None:
    """(x, factors of its axes 2 and later) when ``reshape`` ends a nearest upsampling
    step of a float tensor of rank 3 to 5; an ``x`` that is itself a ``nearest_upsample``
    read only by this step is merged into one op."""
    step = tile_step(graph, reshape)
    if step is None or step.x.type.dtype not in _FLOATS or not 3 <= step.x.rank <= 5:
        return None
    x = step.x
    factors = [1] * (x.rank - 2)
    inner = producer_of(x, "nearest_upsample")
    if inner is not None and only_reader(graph, x, step.unsqueeze) and len(inner.attrs["factors"]) == len(factors):
        factors = [int(f) for f in inner.attrs["factors"]]
        x = inner.inputs[0]
    factors[step.axis - 2] *= step.factor
    return x, factors


@attrs.frozen
class NearestUpsample(Pass):
    """Nearest upsamplings by integer factors (the tile form) as ``nearest_upsample``
    ops, consecutive axes merged into one op."""

    name = "nearest-upsample"

    def run(self, graph: Graph) -> PassResult:
        count = 0
        while (found := first_match(graph, match)) is not None:
            reshape, (x, factors) = found
            out = graph.create_op("nearest_upsample", [x], {"factors": tuple(factors)}, loc=reshape.loc,
                                  names=["upsample"]).output
            take_place(graph, reshape.output, out)
            count += 1
        return PassResult(graph, count > 0, {"upsamplings": count} if count else {})
