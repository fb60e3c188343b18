"""A sort along a dynamic axis, written with comparisons for tract.

tract's top-k reads ``k`` as a tensor when it runs, and casts it to an integer there
(``Topk::eval``, tract 0.23.9). The ``k`` of a sort is the length of its axis; on a
dynamic axis that is a symbolic value, which tract folds into a constant it then cannot
cast: the model loads and fails when it runs. So a sort of a dynamic axis (``topk`` with
``k = WHOLE_AXIS``) is written here without ``topk``, as PyTorch's stable sort defines
it. Element ``i`` goes to place ``rank[i]``, the number of elements before it, and ``j``
comes before ``i`` when ``x[j]`` is smaller (larger, for a descending sort) or equal
with ``j < i``; NaN counts as larger than every number and equal to NaN (PyTorch's
order). The sort's indices are then ``Σ_i i · [rank[i] = r]`` (exact integers), and
its values a gather of them.

That is ``n²`` comparisons per sorted row, ``n`` the axis' length. Measured in tract 0.23.9
(a stable sort of an f32 vector, CPU time per run): n = 64: 0.18 ms, 256: 1.7 ms, 1024:
26 ms, 4096: 840 ms, where tract's top-k of a static axis takes 0.02-0.6 ms. Fine for the hundreds of (token, expert) pairs of
a short prompt, slow for long prefills: the jit frontend does not sort there (it extracts
transformers' experts, :mod:`t2n.frontend.transformers_experts`). A static axis keeps
tract's top-k. The other form tried, tract's top-k with ``k`` counted from the data (which
tract does not fold), loads for a lone sort but gives the axis a symbol of its own, so the
reshapes after a router's sort no longer load, and its order of ties and NaN is not
PyTorch's.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from t2n.ir import Builder, DType, Graph, Op, Value
from t2n.ir.ops.sort import WHOLE_AXIS
from t2n.passes.rewrite import Pattern, PatternPass


def match(graph: Graph, op: Op) -> Op | None:
    """``op`` when it is a sort of an axis whose length is not a number."""
    if op.kind != "topk" or int(op.attrs["k"]) != WHOLE_AXIS:
        return None
    x = op.inputs[0]
    return op if not isinstance(x.type.shape[int(op.attrs["axis"])], int) else None


def _before(b: Builder, xj: Value, xi: Value, largest: bool) -> tuple[Value, Value]:
    """(``x[j]`` strictly before ``x[i]``, ``x[j]`` equal to ``x[i]``) in the sort's order,
    NaN after every number when ascending and before when descending, as PyTorch sorts."""
    strictly = b.op("gt" if largest else "lt", xj, xi)
    equal = b.op("eq", xj, xi)
    if xj.type.dtype.is_float:
        nan_j, nan_i = b.op("is_nan", xj), b.op("is_nan", xi)
        first, second = (nan_j, nan_i) if largest else (nan_i, nan_j)
        strictly = b.op("or", strictly, b.op("and", first, b.op("not", second)))
        equal = b.op("or", equal, b.op("and", nan_j, nan_i))
    return strictly, equal


def sorted_by_ranks(graph: Graph, op: Op, _: Op) -> dict[Value, Value]:
    """The sort's (values, indices) from each element's rank."""
    b = Builder(graph, op.loc)
    x = op.inputs[0]
    axis, last = int(op.attrs["axis"]), x.rank - 1
    perm = [*[a for a in range(x.rank) if a != axis], axis]
    xt = x if axis == last else b.op("transpose", x, perm=tuple(perm))
    n = x.type.shape[axis]
    iota = b.op("range", b.const(0, DType.I64), b.const(n, DType.I64), b.const(1, DType.I64))
    xi, xj = b.op("unsqueeze", xt, axes=(last + 1,)), b.op("unsqueeze", xt, axes=(last,))  # [.., n, 1], [.., 1, n]
    strictly, equal = _before(b, xj, xi, bool(op.attrs["largest"]))
    earlier = b.op("lt", b.op("unsqueeze", iota, axes=(0,)), b.op("unsqueeze", iota, axes=(1,)))  # [j < i]
    before = b.op("or", strictly, b.op("and", equal, earlier))
    rank = b.op("sum_reduce", b.cast(before, DType.I64), axes=(last + 1,))  # [.., n]: the place of each i
    lands = b.op("eq", b.op("unsqueeze", rank, axes=(last + 1,)), iota)  # [.., i, r]: i goes to r
    column = b.op("unsqueeze", iota, axes=(1,))  # i, as [n, 1]
    indices = b.op("sum_reduce", b.op("select", lands, column, b.const(np.array(0, np.int64))), axes=(last,))
    values = b.op("gather_elements", xt, indices, axis=last)
    if axis != last:
        back = tuple(int(p) for p in np.argsort(perm))
        values, indices = b.op("transpose", values, perm=back), b.op("transpose", indices, perm=back)
    out_values, out_indices = op.outputs
    return {out_values: values, out_indices: indices}


@attrs.frozen
class DynamicAxisSort(PatternPass):
    """Sorts of dynamic axes as comparisons (see the module docstring)."""

    name = "dynamic-axis-sort"

    def patterns(self) -> list[Pattern[Any]]:
        return [Pattern("sorts", match, sorted_by_ranks)]
