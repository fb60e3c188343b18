"""``bind_scalar_to_dim_size``: an input that always equals the size of another input's
axis (a ``length`` beside ``audio[1, 80, T]``) is removed; every reader gets that size,
computed from the other input's shape in the graph (``shape_of`` and ``gather``), so it
stays symbolic."""

from __future__ import annotations

import math

import attrs
import numpy as np

from t2n.errors import RemodelPlanError
from t2n.ir import ArrayData, DType, Graph, Sym, Value
from t2n.passes.base import Pass, PassResult
from t2n.passes.remodel.common import find_input, norm_axes


@attrs.frozen
class BindScalarToDimSize(Pass):
    """Removes input ``input`` (one element, integer or float) and makes its readers read
    ``source.shape[axis]`` instead, in its dtype and shape."""

    input: str
    source: str
    axis: int
    key: str = "bind_scalar_to_dim_size"
    name = "bind-scalar-to-dim-size"

    def run(self, graph: Graph) -> PassResult:
        v = find_input(graph, self.input, self.key)
        src = find_input(graph, self.source, self.key)
        if self.source == self.input:
            raise RemodelPlanError(self.key, f"input {self.input!r} cannot be bound to its own size")
        shape = v.type.shape
        if not shape.is_static or math.prod(int(d) for d in shape) != 1:
            raise RemodelPlanError(self.key, f"input {self.input!r} is {v.type}: only a single value "
                                             "(a scalar, or a tensor of one element) can be a size")
        if v.type.dtype is DType.BOOL:
            raise RemodelPlanError(self.key, f"input {self.input!r} is bool, not a number")
        (axis,) = norm_axes((self.axis,), src.rank, self.key)
        size = self._size(graph, src, axis)
        readers = list(v.uses)
        for op, index in readers:
            graph.set_op_input(op, index, size)
        graph.set_outputs([size if o is v else o for o in graph.outputs])
        graph.remove_input(v)
        if graph.info.input_names is not None:
            graph.info.input_names = tuple(n for n in graph.info.input_names if n != self.input)
        return PassResult(graph, True, {"bound": 1, "readers": len(readers)})

    def _size(self, graph: Graph, src: Value, axis: int) -> Value:
        """``src.shape[axis]`` as a value of ``self.input``'s dtype and shape."""
        target = find_input(graph, self.input, self.key)
        dim = src.type.shape[axis]
        if not isinstance(dim, Sym):
            arr = np.full(tuple(int(d) for d in target.type.shape), int(dim)).astype(target.type.dtype.numpy)
            return graph.create_op("const", [], {"data": ArrayData(arr)}, names=[self.input]).output
        shape = graph.create_op("shape_of", [src], names=[f"{self.source}_shape"]).output
        index = graph.create_op("const", [], {"data": ArrayData(np.asarray(axis, dtype=np.int64))},
                                names=[f"{self.source}_axis"]).output
        size = graph.create_op("gather", [shape, index], {"axis": 0}, names=[f"{self.input}_size"]).output
        if target.type.dtype is not DType.I64:
            size = graph.create_op("cast", [size], {"to": target.type.dtype}, names=[f"{self.input}_cast"]).output
        if target.rank:
            dims = np.asarray([int(d) for d in target.type.shape], dtype=np.int64)
            shape_v = graph.create_op("const", [], {"data": ArrayData(dims)}, names=[f"{self.input}_dims"]).output
            size = graph.create_op("reshape", [size, shape_v], names=[self.input]).output
        return size
