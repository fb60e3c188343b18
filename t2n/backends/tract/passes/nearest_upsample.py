"""Nearest upsampling by integer factors in one step, for tract 0.23.9: tract's own
``nearest_upsample`` in 1-D and 2-D (the IR op ``tract_nearest_upsample``,
:mod:`t2n.backends.tract.ops`), one ``tile`` of every axis in 3-D.

The frontend writes nearest upsampling by an integer factor as
``reshape(tile(unsqueeze(x)))``, one axis at a time (:mod:`t2n.passes.tile_upsampling`).
tract 0.23.9 loads NNEF's ``nearest_upsample`` as its own resize op and runs it as one
kernel (``NearestUpsample``): the op its ONNX loader builds for a ``Resize`` by integer
scales, and what it writes back when it saves such a model as NNEF. Every output is one
input (bit-exact); a dynamic axis stays dynamic.

The rule, measured in tract 0.23.9 (CPU time, the forms' runs alternating; the
artifact-speed grid, ``python -m benchmarks.artifact_speed --grid --cases nearest``,
benchmarks/RESULTS_ARTIFACT_SPEED.md):

* 1-D and 2-D: ``nearest_upsample`` was the fastest form tried or within 2% of it, factors
  2 to 4, 1 to 64 channels, 32 to 512 wide, batch 1 and 8, with a convolution in front or
  not; the ones-kernel deconv it replaces ran 1.5-13x slower (32 channels, 128², x2: 4.9
  against 1.1 ms of CPU time), the per-axis tile form up to 47x, tract's generic resize
  with output sizes (the ONNX path when PyTorch is given ``size=``) 6-15x.
* 3-D: there tract's ``NearestUpsample`` is 3.7-6.2x slower than one ``tile`` of the
  three axes at once (16 channels, 8³, x2: 1.12 against 0.39 ms; 1 channel, 32³, x4: 38.7
  against 6.3 ms), which was the fastest form or within 1.2x of it (a broadcast: the same;
  the deconv: 0.7-1.8x of it; tract's generic resize: 1.1-2.5x).

Older tract keeps the deconv form (:mod:`t2n.backends.tract.passes.nearest_deconv`): tract 0.23.3 and
0.23.5 load ``nearest_upsample`` but run it ~400x slower (240 against 0.5 ms at 32 x
128², x2), and 0.23.0 cannot load it.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from t2n.backends.tract.ops import with_tract_forms
from t2n.ir import Builder, DType, Graph, Op, SourceLoc, Value
from t2n.ir.graph import constant_data
from t2n.passes.rewrite import Pattern, PatternPass, only_reader, producer_of
from t2n.passes.tile_upsampling import tile_step

_FLOATS = frozenset({DType.F16, DType.F32, DType.F64})


def match(graph: Graph, reshape: Op) -> tuple[Value, list[int]] | None:
    """(x, factors of its axes 2 and later) when ``reshape`` ends a nearest upsampling
    step of a float tensor of rank 3 to 5; an ``x`` upsampled by this pass and read only
    by this step is merged into one op."""
    step = tile_step(graph, reshape)
    if step is None or step.x.type.dtype not in _FLOATS or not 3 <= step.x.rank <= 5:
        return None
    x = step.x
    factors = [1] * (x.rank - 2)
    inner = _made_here(x)
    if inner is not None and only_reader(graph, x, step.unsqueeze):
        x, factors = inner
    factors[step.axis - 2] *= step.factor
    return x, factors


def _made_here(v: Value) -> tuple[Value, list[int]] | None:
    """(input, factors) when ``v`` is an upsampling this pass wrote."""
    op = producer_of(v, "tract_nearest_upsample")
    if op is not None:
        return op.inputs[0], [int(f) for f in op.attrs["factors"]]
    reshape = producer_of(v, "reshape")
    tile = producer_of(reshape.inputs[0], "tile") if reshape is not None and v.rank == 5 else None
    unsq = producer_of(tile.inputs[0], "unsqueeze") if tile is not None else None
    reps = constant_data(tile.inputs[1]) if tile is not None else None
    if unsq is None or reps is None or tuple(unsq.attrs["axes"]) != (3, 5, 7):
        return None
    flat = [int(r) for r in np.asarray(reps).reshape(-1)]
    return unsq.inputs[0], flat[3::2]


def one_tile(graph: Graph, x: Value, factors: list[int], loc: SourceLoc) -> Value:
    """Every spatial axis repeated at once: one unit axis after each, one ``tile``, one
    reshape to the upsampled sizes (read from ``x``'s shape, so they may be symbolic)."""
    b = Builder(graph, loc)
    n = len(factors)
    y = b.op("unsqueeze", x, axes=tuple(3 + 2 * i for i in range(n)))
    y = b.op("tile", y, b.ints([1, 1, *[r for f in factors for r in (1, f)]]))
    sizes = b.op("mul", b.op("shape_of", x), b.ints([1, 1, *factors]))
    return b.op("reshape", y, sizes, name="upsample")


def _upsampled(graph: Graph, reshape: Op, found: tuple[Value, list[int]]) -> Value:
    x, factors = found
    if x.rank == 5:
        return one_tile(graph, x, factors, reshape.loc)
    graph.opset = with_tract_forms(graph.opset)
    return graph.create_op("tract_nearest_upsample", [x], {"factors": tuple(factors)}, loc=reshape.loc,
                           names=["upsample"]).output


@attrs.frozen
class NearestUpsample(PatternPass):
    """Nearest upsamplings by integer factors (the tile form) as ``nearest_upsample``
    ops in 1-D and 2-D, as one tile of every axis in 3-D; consecutive axes merged."""

    name = "nearest-upsample"

    def patterns(self) -> list[Pattern[Any]]:
        return [Pattern("upsamplings", match, _upsampled)]
