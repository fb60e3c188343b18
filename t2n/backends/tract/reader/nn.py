"""tract's matrix, convolution and normalization operations."""

from __future__ import annotations

from t2n.backends.nnef.reader.infer_nn import (
    CONV_SIGNATURE,
    NORM_SIGNATURE,
    SOFTMAX_SIGNATURE,
    conv_result,
    same_type,
    softmax_result,
)
from t2n.backends.nnef.reader.optable import Args, ReadOpTable, TensorVal, tensor
from t2n.ir.dims import Dim

TRACT = ReadOpTable("nn/tract")

TRACT.op("tract_core_qconv", CONV_SIGNATURE)(conv_result)
TRACT.op(["tract_core_softmax", "tract_core_log_softmax"], SOFTMAX_SIGNATURE)(softmax_result)
TRACT.op(["tract_core_rms_norm", "tract_transformers_rms_norm"], NORM_SIGNATURE)(same_type)


@TRACT.op("tract_core_einsum", "inputs, expr, acc = '', output = ''")
def _einsum(a: Args) -> list[TensorVal]:
    xs = a.tensors("inputs")
    expr = a.text("expr").replace(" ", "")
    lhs, _, rhs = expr.partition("->")
    sizes: dict[str, Dim] = {}
    for term, x in zip(lhs.split(","), xs):
        if len(term) != x.rank:
            raise a.fail(f"term {term!r} does not match an input of rank {x.rank}")
        for letter, d in zip(term, x.shape):
            if letter not in sizes or sizes[letter] == 1:
                sizes[letter] = d
    dtype = a.dtype("output") if a.text("output") else xs[0].dtype
    return [tensor(dtype, [sizes[c] for c in rhs])]


@TRACT.op("tract_core_grid_sample", "input, grid, mode = 'bilinear', padding_mode = 'zeros', align_corners = false")
def _grid_sample(a: Args) -> list[TensorVal]:
    x, g = a.tensor("input"), a.tensor("grid")
    return [tensor(x.dtype, [x.shape[0], x.shape[1], *g.shape[1:-1]])]
