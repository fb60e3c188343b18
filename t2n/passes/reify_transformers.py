"""Passes that give transformer language models' rotary embedding and RMS normalization
one op each, found in the IR by pattern (whatever module or function wrote them), so that
tract runs ``tract_transformers_apply_rope`` / ``tract_core_rms_norm``:

- :class:`ReifyRope`: ``add(mul(x, cos), mul(concat([neg(x[..., h:]), x[..., :h]]), sin))``
  (either operand order) → ``apply_rope(x, cos, sin)``;
- :class:`ReifyRmsNorm`: ``mul(x, rsqrt(add(mean_reduce(square(x)), eps)))`` over one
  axis → ``rms_norm(x) {axes, eps}`` (the weight stays a ``mul`` after it).

A match is rewritten only where every intermediate value has no other reader; what does
not match keeps its decomposed form. Older tract targets write the decomposed form again
(see the emitters), so the passes are safe for every version.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from t2n.ir import Graph, Op, Value
from t2n.ir.graph import constant_data
from t2n.passes.rewrite import Pattern, PatternPass, only_reader, producer_of

_INT_MAX = np.iinfo(np.int64).max



def _ints(v: Value) -> list[int] | None:
    data = constant_data(v)
    return None if data is None else [int(i) for i in np.asarray(data).reshape(-1)]


def _half_slice(op: Op | None, x: Value, first: bool) -> bool:
    """``op`` is ``x[..., :h]`` (first) or ``x[..., h:]`` on the last axis of ``x``."""
    if op is None or op.inputs[0] is not x or len(op.inputs) != 3:
        return False
    size = x.type.shape[-1]
    axes = [a % x.rank for a in op.attrs.get("axes", ())]
    begin, end = _ints(op.inputs[1]), _ints(op.inputs[2])
    if not isinstance(size, int) or axes != [x.rank - 1] or list(op.attrs.get("steps", [1])) != [1]:
        return False
    half = size // 2
    if first:
        return begin == [0] and end == [half]
    return begin == [half] and end is not None and len(end) == 1 and end[0] in (size, _INT_MAX)


def _rotated_of(graph: Graph, rotated: Value, reader: Op) -> Value | None:
    """x when ``rotated`` is ``concat([neg(x[..., h:]), x[..., :h]])`` read only by ``reader``."""
    cat = producer_of(rotated, "concat")
    if cat is None or not only_reader(graph, rotated, reader) or len(cat.inputs) != 2:
        return None
    negated, first = cat.inputs
    neg = producer_of(negated, "neg")
    second = producer_of(neg.inputs[0], "slice") if neg is not None else None
    if neg is None or second is None or not only_reader(graph, negated, cat):
        return None
    x = second.inputs[0]
    if cat.attrs["axis"] % max(x.rank, 1) != x.rank - 1 or not only_reader(graph, neg.inputs[0], neg):
        return None
    if not (_half_slice(producer_of(first, "slice"), x, True)
            and only_reader(graph, first, cat) and _half_slice(second, x, False)):
        return None
    return x


def _rope_operands(graph: Graph, add: Op) -> tuple[Value, Value, Value] | None:
    """(x, cos, sin) of the rotary embedding that ``add`` ends."""
    if add.kind != "add" or not add.output.type.dtype.is_float:
        return None
    for mul_cos_v, mul_sin_v in (add.inputs, add.inputs[::-1]):
        mul_cos, mul_sin = producer_of(mul_cos_v, "mul"), producer_of(mul_sin_v, "mul")
        if mul_cos is None or mul_sin is None or mul_cos is mul_sin:
            continue
        if not (only_reader(graph, mul_cos_v, add) and only_reader(graph, mul_sin_v, add)):
            continue
        for rotated, sin in (mul_sin.inputs, mul_sin.inputs[::-1]):
            x = _rotated_of(graph, rotated, mul_sin)
            if x is None:
                continue
            for x_side, cos in (mul_cos.inputs, mul_cos.inputs[::-1]):
                if x_side is x and x.type.shape == add.output.type.shape:
                    return x, cos, sin
    return None


def _rms_operands(graph: Graph, mul: Op) -> tuple[Value, int, float] | None:
    """(x, axis, eps) of ``mul(x, rsqrt(add(mean_reduce(square(x)), eps)))``."""
    if mul.kind != "mul" or not mul.output.type.dtype.is_float:
        return None
    for x, inv in (mul.inputs, mul.inputs[::-1]):
        rsqrt = producer_of(inv, "rsqrt")
        add = producer_of(rsqrt.inputs[0], "add") if rsqrt is not None else None
        if rsqrt is None or add is None or not only_reader(graph, inv, mul):
            continue
        for mean_v, eps_v in (add.inputs, add.inputs[::-1]):
            mean, eps = producer_of(mean_v, "mean_reduce"), constant_data(eps_v)
            square = producer_of(mean.inputs[0], "square") if mean is not None else None
            if mean is None or square is None or eps is None or np.asarray(eps).size != 1:
                continue
            axes = [a % x.rank for a in mean.attrs["axes"]]
            if (square.inputs[0] is x and len(axes) == 1 and mean.attrs.get("keepdims", False)
                    and only_reader(graph, mean_v, add) and only_reader(graph, mean.inputs[0], mean)
                    and only_reader(graph, rsqrt.inputs[0], rsqrt)):
                return x, axes[0], float(np.asarray(eps).reshape(()))
    return None


def _build_rope(graph: Graph, op: Op, found: tuple[Value, Value, Value]) -> Value:
    return graph.create_op("apply_rope", list(found), loc=op.loc, names=["rope"]).output


def _build_rms(graph: Graph, op: Op, found: tuple[Value, int, float]) -> Value:
    x, axis, eps = found
    return graph.create_op("rms_norm", [x], {"axes": (axis,), "eps": eps}, loc=op.loc, names=["rms_norm"]).output


@attrs.frozen
class ReifyRope(PatternPass):
    """Rotary position embeddings (rotate-half form) as ``apply_rope`` ops."""

    name = "reify-rope"

    def patterns(self) -> list[Pattern[Any]]:
        return [Pattern("rotary embeddings", _rope_operands, _build_rope)]


@attrs.frozen
class ReifyRmsNorm(PatternPass):
    """RMS normalizations written with a mean of squares as ``rms_norm`` ops."""

    name = "reify-rms-norm"

    def patterns(self) -> list[Pattern[Any]]:
        return [Pattern("rms norms", _rms_operands, _build_rms)]
