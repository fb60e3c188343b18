"""The frontend's nearest upsampling by an integer factor, as target passes find it:
``reshape(tile(unsqueeze(x, axes=[axis + 1]), reps))``, one spatial axis at a time.
Shared by the passes that rewrite it into one op of tract's (debox, ones-kernel deconv)."""

from __future__ import annotations

import attrs
import numpy as np

from t2n.ir import Graph, Op, Value
from t2n.ir.graph import constant_data
from t2n.passes.rewrite import only_reader, producer_of


@attrs.frozen
class TileStep:
    """One axis of a nearest upsampling: ``x`` repeated ``factor`` times along ``axis``;
    ``unsqueeze`` is the first op of the form (read once, by the tile)."""

    x: Value
    axis: int
    factor: int
    unsqueeze: Op


def tile_step(graph: Graph, reshape: Op) -> TileStep | None:
    """The step ``reshape`` ends, when it repeats each element of one spatial axis (2 or
    later) two times or more, reps all one elsewhere, each intermediate read only by the
    next op and the result shaped as ``x`` with that axis multiplied."""
    if reshape.kind != "reshape":
        return None
    tile = producer_of(reshape.inputs[0], "tile")
    if tile is None or not only_reader(graph, tile.output, reshape):
        return None
    unsq = producer_of(tile.inputs[0], "unsqueeze")
    reps = constant_data(tile.inputs[1])
    if unsq is None or reps is None or not only_reader(graph, unsq.output, tile):
        return None
    x = unsq.inputs[0]
    axes = list(unsq.attrs["axes"])
    if len(axes) != 1:
        return None
    axis = axes[0] - 1
    flat = [int(r) for r in np.asarray(reps).reshape(-1)]
    if axis < 2 or len(flat) != x.rank + 1 or any(r != 1 for i, r in enumerate(flat) if i != axis + 1):
        return None
    factor = flat[axis + 1]
    expected = [d * factor if i == axis else d for i, d in enumerate(x.type.shape)]
    if factor < 2 or list(reshape.output.type.shape) != expected:
        return None
    return TileStep(x, axis, factor, unsq)
