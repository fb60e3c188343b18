"""Nearest upsampling by integer factors as one transposed convolution with a kernel of
ones, for tract 0.23.0 to 0.23.8 (0.23.9 runs its own ``nearest_upsample`` faster:
:mod:`t2n.backends.tract.passes.nearest_upsample`).

The frontend writes nearest upsampling by an integer factor as
``reshape(tile(unsqueeze(x)))``, one axis at a time: a form every engine reads, but one
tract copies element by element, twice for a 2-D upsampling. A depthwise ``deconv``
whose kernel is ones and whose stride is the kernel size has windows that do not
overlap, so every output is exactly one input times one (bit-exact), and tract runs it
several times faster (benchmarks/RESULTS_ARTIFACT_SPEED.md). The kernel holds one value
per channel and factor: it does not grow with the image. A dynamic spatial size stays
dynamic.

Only 2-D upsamplings (N, C, H, W) that do not follow a convolution or matrix product
(directly or through element-wise ops) are rewritten: tract 0.23.9 fails to prepare some
layer → deconv chains (one channel, 1-D and 3-D shapes: its optimiser folds the ones
kernel into the layer's product with the wrong shape), so those keep the tile form.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from t2n.ir import Builder, DType, Graph, Op, Trait, Value
from t2n.ir.graph import constant_data
from t2n.passes.rewrite import Pattern, PatternPass, only_reader
from t2n.passes.tile_upsampling import tile_step as find_tile_step

_FLOATS = frozenset({DType.F16, DType.F32, DType.F64})
_LAYERS = frozenset({"conv", "deconv", "matmul"})
_TILE_STEPS = frozenset({"unsqueeze", "tile", "reshape"})


def tile_step(graph: Graph, reshape: Op) -> tuple[Value, int, int] | None:
    """(x, axis, factor) when ``reshape`` ends a nearest upsampling step (see
    :mod:`t2n.passes.tile_upsampling`) of a float N, C, H, W tensor with a static channel
    count that does not follow a layer."""
    step = find_tile_step(graph, reshape)
    if step is None or step.x.type.dtype not in _FLOATS or step.x.rank != 4 or after_a_layer(step.x):
        return None
    if not isinstance(step.x.type.shape[1], int):
        return None
    return step.x, step.axis, step.factor


def after_a_layer(x: Value) -> bool:
    """Whether ``x`` is computed from a convolution or matrix product through element-wise
    ops, tile steps and upsamplings only (any computed operand counts)."""
    todo, seen = [x], set()
    while todo:
        p = todo.pop().producer
        if p is None or id(p) in seen or p.has(Trait.CONSTANT_LIKE):
            continue
        seen.add(id(p))
        if ones_upsampling(p) is not None:
            todo.append(p.inputs[0])
        elif p.kind in _LAYERS:
            return True
        if p.has(Trait.ELEMENTWISE) or p.kind in _TILE_STEPS:
            todo += list(p.inputs)
    return False


def ones_upsampling(op: Op | None) -> list[int] | None:
    """The factors of each spatial axis when ``op`` is a nearest upsampling written as a
    deconv (kernel of ones, one channel per group, stride = kernel, nothing cropped)."""
    if op is None or op.kind != "deconv" or len(op.inputs) != 2:
        return None
    x, w = op.inputs
    kernel = constant_data(w)
    channels = x.type.shape[1]
    if kernel is None or not isinstance(channels, int) or kernel.shape[:2] != (channels, 1):
        return None
    factors = [int(k) for k in kernel.shape[2:]]
    n = len(factors)
    same = (tuple(op.attrs["stride"]) == tuple(factors) and tuple(op.attrs["dilation"]) == (1,) * n
            and all(tuple(p) == (0, 0) for p in op.attrs["padding"]) and int(op.attrs.get("groups", 1)) == channels)
    return factors if same and bool(np.all(np.asarray(kernel) == 1)) else None


def _upsampling(graph: Graph, x: Value, factors: list[int], reshape: Op) -> Value:
    """One ones-kernel deconv of ``x`` by ``factors`` (one per spatial axis)."""
    b = Builder(graph, reshape.loc)
    dtype = x.type.dtype
    channels = int(x.type.shape[1])  # type: ignore[arg-type]
    ones = b.const(np.ones((channels, 1, *factors), dtype=dtype.numpy), dtype, name="upsample_ones")
    n = len(factors)
    return b.op("deconv", x, ones, name="upsample", stride=tuple(factors), dilation=(1,) * n,
                padding=((0, 0),) * n, output_padding=(0,) * n, groups=channels)


def match_upsampling(graph: Graph, reshape: Op) -> tuple[Value, list[int]] | None:
    """(x, factor of each spatial axis) when ``reshape`` ends a nearest upsampling step
    (:func:`tile_step`); a step whose input is itself a ones-kernel deconv read only here
    is merged with it into one op."""
    step = tile_step(graph, reshape)
    if step is None:
        return None
    x, axis, factor = step
    factors = [1] * (x.rank - 2)
    inner = x.producer
    merged = ones_upsampling(inner)
    if merged is not None and inner is not None and only_reader(graph, x, x.uses[0][0]):
        x, factors = inner.inputs[0], merged
    factors[axis - 2] *= factor
    return x, factors


def _upsampled(graph: Graph, reshape: Op, found: tuple[Value, list[int]]) -> Value:
    x, factors = found
    return _upsampling(graph, x, factors, reshape)


@attrs.frozen
class NearestAsDeconv(PatternPass):
    """Nearest upsamplings by integer factors (the tile form) as ones-kernel deconvs,
    consecutive axes merged into one op."""

    name = "nearest-as-deconv"

    def patterns(self) -> list[Pattern[Any]]:
        return [Pattern("upsamplings", match_upsampling, _upsampled)]
