"""Compute the last layer for the kept positions only: move the slice that keeps the
last logits' positions up through the ops that treat each position on their own.

An LLM export keeps the logits of the last position (``num_logits_to_keep=1``): the
graph slices the final hidden states before the vocabulary projection. Everything the
slice reads that is computed position by position (norms, residual adds, the MLP or a
``tract_moe_ffn``, the output projection) only needs that position; what the cache
outputs need (the keys and values of every position) stays whole. tract moves such
slices through its own ops but not through ``tract_moe_ffn``: on the 4-layer Mixtral of
``benchmarks/llm_latency.py`` the last layer's experts ran on all 64 prompt positions,
~20 % of tract's profile of the prefill (23.5 of 127 ms, tract 0.23.9).

Validity does not depend on which rows are kept: each moved op is row-wise on the
sliced axis, and a value is moved only when every reader is moved with it (so no op is
computed twice). Where a value is also needed whole, it is sliced there instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np

from t2n.ir import Builder, Dim, Graph, Op, Trait, Value
from t2n.passes.rewrite import Pattern, PatternPass, Patterns

RowMap = list[int | None]
"""For each input of an op: the axis that carries the output's sliced axis, or None
when the input is read whole (a weight, a broadcast operand, a shape)."""

_ROW_WISE = {"tract_moe_ffn": 1, "moe_experts": 3}
"""Ops of the LLM exports that compute each row (axis 0) of their first inputs (how
many) on its own: the routed experts, each token by itself."""


def _broadcast(op: Op, axis: int) -> RowMap | None:
    out = op.output.type.shape
    mapping: RowMap = []
    for v in op.inputs:
        shape = v.type.shape
        b = axis - (len(out) - len(shape))
        if b < 0 or shape[b] == 1:
            mapping.append(None)
        elif shape[b] == out[axis]:
            mapping.append(b)
        else:
            return None
    return mapping


def _axes(op: Op) -> list[int]:
    rank = op.inputs[0].rank
    return [int(a) % rank for a in op.attrs.get("axes", ())]


def _reshape(op: Op, axis: int) -> RowMap | None:
    """The input axis of a reshape that holds the output's ``axis`` unchanged: the same
    size, and the same static sizes before and after it."""
    out, src = list(op.output.type.shape), list(op.inputs[0].type.shape)
    others = out[:axis] + out[axis + 1:]
    if not all(isinstance(d, int) for d in others):
        return None
    before = int(np.prod([int(d) for d in out[:axis]], dtype=np.int64))
    for b, d in enumerate(src):
        rest = src[:b] + src[b + 1:]
        if d == out[axis] and all(isinstance(x, int) for x in rest) and \
                int(np.prod([int(x) for x in src[:b]], dtype=np.int64)) == before:
            return [b, None]
    return None


def row_mapping(op: Op, axis: int) -> RowMap | None:
    """How the output's ``axis`` reaches ``op``'s inputs, or None if ``op`` mixes the
    positions along it (or is not known to keep them apart)."""
    kind, rank = op.kind, op.outputs[0].rank
    if kind == "topk":
        return [axis] if int(op.attrs["axis"]) % rank != axis else None
    if len(op.outputs) != 1:
        return None
    if op.has(Trait.ELEMENTWISE):
        return _broadcast(op, axis)
    if kind.endswith("_reduce") or kind in ("softmax", "log_softmax"):
        keeps = kind in ("softmax", "log_softmax") or op.attrs.get("keepdims", False)
        return [axis] + [None] * (len(op.inputs) - 1) if keeps and axis not in _axes(op) else None
    if kind == "slice":
        return [axis, None, None] if axis not in _axes(op) else None
    if kind == "concat":
        return [axis] * len(op.inputs) if int(op.attrs["axis"]) % rank != axis else None
    if kind == "transpose":
        return [int(op.attrs["perm"][axis])]
    if kind == "reshape":
        return _reshape(op, axis)
    weights = op.inputs[1].producer if len(op.inputs) > 1 else None
    if kind == "matmul" and not op.attrs.get("transpose_a") and axis == rank - 2 and weights is not None \
            and weights.has(Trait.CONSTANT_LIKE):
        # projections only: tract 0.23.9 ran a decode step's attention matmuls with one
        # static query row 20x slower (~0.4 ms) than with S rows; it splits the
        # attention-by-values product itself.
        return [op.inputs[0].rank - 2, None]
    if kind in _ROW_WISE and axis == 0:
        rows = _ROW_WISE[kind]
        return [0] * rows + [None] * (len(op.inputs) - rows)
    return None


@attrs.frozen
class _Plan:
    """What moving one slice up rewrites: the graph's ops in order, the input mapping of
    each op moved (by id), and the values replaced by their kept rows (by id: the axis)."""

    order: Sequence[Op]
    plans: dict[int, RowMap]
    rows: dict[int, int]


def _candidate(graph: Graph, op: Op) -> bool:
    """A slice of one axis to a static size, out of a symbolic one."""
    if op.kind != "slice" or len(op.inputs) != 3 or len(_axes(op)) != 1:
        return False
    axis = _axes(op)[0]
    steps = list(op.attrs.get("steps", [1]))
    x = op.inputs[0]
    return (steps == [1] and not isinstance(x.type.shape[axis], int)
            and isinstance(op.output.type.shape[axis], int) and x.producer is not None
            and len(x.uses) == 1 and not graph.is_output(x))


def _plan(graph: Graph, cut: Op) -> _Plan | None:
    """The ops above the slice ``cut`` that can compute its rows only, if any."""
    if not _candidate(graph, cut):
        return None
    axis0 = _axes(cut)[0]
    size: Dim = cut.inputs[0].type.shape[axis0]
    rows = {id(cut.inputs[0]): axis0}  # values replaced by their kept rows, by axis
    plans: dict[int, RowMap] = {}   # moved ops, by id: their input mappings
    order = graph.ops()
    for op in reversed(order[:order.index(cut)]):
        axes = {rows.get(id(v)) for v in op.outputs}
        if len(axes) != 1 or None in axes:
            continue
        axis = rows[id(op.outputs[0])]
        mapping = row_mapping(op, axis)
        if mapping is None or op.has(Trait.STATEFUL):
            continue
        mapping = mapping + [None] * (len(op.inputs) - len(mapping))
        if any(b is not None and v.type.shape[b] != size for v, b in zip(op.inputs, mapping)):
            continue
        plans[id(op)] = mapping
        for v, b in zip(op.inputs, mapping):
            if b is not None and v.type.shape[b] == size and _all_readers_moved(graph, v, b, plans):
                rows[id(v)] = b
    return _Plan(order, plans, rows) if plans else None


_SLICE_UP = Pattern("slices moved up", _plan, lambda graph, cut, plan: _kept_rows(graph, cut, plan))
"""A slice of positions → the same rows computed by the ops above it."""


@attrs.frozen
class SliceRowsEarly(PatternPass):
    """Move a slice of positions up through the row-wise ops that only it reads."""

    name = "llm-slice-rows-early"

    def patterns(self) -> Patterns:
        return [_SLICE_UP]


def _all_readers_moved(graph: Graph, v: Value, axis: int, plans: dict[int, RowMap]) -> bool:
    if v.producer is None or graph.is_output(v):
        return False
    return all(id(user) in plans and plans[id(user)][i] == axis for user, i in v.uses)


def _kept_rows(graph: Graph, cut: Op, plan: _Plan) -> Value:
    """The moved ops rebuilt on the kept rows; the value that takes ``cut``'s place."""
    order, plans, rows = plan.order, plan.plans, plan.rows
    begin, end = cut.inputs[1], cut.inputs[2]
    kept: dict[int, Value] = {}  # the kept rows of the values moved, by id
    leaves: dict[tuple[int, int], Value] = {}  # the slices of values read whole elsewhere

    def sliced(v: Value, axis: int) -> Value:
        if (id(v), axis) not in leaves:
            b = Builder(graph, cut.loc)
            leaves[id(v), axis] = b.op("slice", v, begin, end, axes=(axis,), steps=(1,))
        return leaves[id(v), axis]

    count = cut.output.type.shape[_axes(cut)[0]]
    assert isinstance(count, int)  # a candidate's
    for op in order:
        mapping = plans.get(id(op))
        if mapping is None:
            continue
        inputs: list[Value] = []
        for i, (v, b) in enumerate(zip(op.inputs, mapping)):
            if b is None:
                if op.kind == "reshape" and i == 1:
                    shape = list(op.output.type.shape)
                    shape[rows[id(op.outputs[0])]] = count
                    v = Builder(graph, op.loc).ints(shape)
                inputs.append(v)
            else:
                inputs.append(kept[id(v)] if id(v) in kept else sliced(v, b))
        new = graph.create_op(op.kind, inputs, dict(op.attrs), loc=op.loc)
        for old, out in zip(op.outputs, new.outputs):
            kept[id(old)] = out
    return kept[id(cut.inputs[0])]

