"""How attention scores are masked: one ``add`` of an additive mask, as PyTorch's math
kernel and tract's ONNX path do, rather than a ``select`` over the whole score tensor.

A bool mask (True = attend) becomes ``select(keep, 0.0, fill)`` on the mask's own shape
(usually far smaller than the scores: it broadcasts over heads and often queries), then
one ``add`` on the scores. ``fill`` is a float so negative that ``exp(fill - row max)``
is exactly 0, so the softmax is the one of the ``select(keep, scores, lowest)`` form,
and tract runs the ``add`` faster (benchmarks/RESULTS_ARTIFACT_SPEED.md).

Each additive mask gets a fill of its own: the floats next to the lowest one, toward
zero (never the lowest itself, which a model's own ``where(keep, 0, finfo.min)`` uses).
tract's optimiser merges identical nodes that read the same inputs (its
``PushSplitDown`` pass). When a graph computes the same mask twice (a BART encoder and
its decoder's cross-attention both from ``attention_mask``) and each copy has its own
identical addend, the masks are merged first, then the addends, and tract 0.23.9 can
leave a node of that chain as a ``Dummy`` op: the model loads but fails to run ("eval()
called on a Dummy op"; the merge checks only the second node of a pair for an earlier
merge in the same sweep, so two nodes may be merged into each other). Addends with
different fills are never identical, so they are never merged; one mask used by many
layers gets one addend, built once. docs/attention_masks.md has the smallest graph that
fails.

Only f32 and f64 scores take the add form: in f16 a score plus the lowest f16 may round
to -inf (then a row with every position masked is NaN instead of the uniform average
the fused kernels' callers rely on); f16 and bf16 keep the select.
"""

from __future__ import annotations

import weakref

import attrs
import numpy as np

from t2n.frontend.helpers import scalar
from t2n.ir import Builder, DType, Graph, Value

ADD_FORM_DTYPES = frozenset({DType.F32, DType.F64})
"""Score dtypes masked by an ``add`` (the others by a ``select``)."""


def lowest(dtype: DType) -> float:
    """The most negative finite value of ``dtype`` (f32's for bf16, which shares its range)."""
    return float(np.finfo(np.float16 if dtype is DType.F16 else
                          np.float64 if dtype is DType.F64 else np.float32).min)


def nth_fill(dtype: DType, n: int) -> float:
    """The ``n``-th float of ``dtype`` from its lowest toward zero (0 → the lowest)."""
    if dtype is DType.F64:
        return float((np.array(np.finfo(np.float64).min).view(np.uint64) - np.uint64(n)).view(np.float64))
    return float((np.array(np.finfo(np.float32).min).view(np.uint32) - np.uint32(n)).view(np.float32))


@attrs.define(eq=False)
class _GraphMasks:
    """The additive masks a graph has, by bool mask and dtype, and how many were made."""

    addends: dict[tuple[Value, DType], Value] = attrs.field(factory=dict)
    combined: dict[tuple[Value, Value], Value] = attrs.field(factory=dict)


_MASKS: weakref.WeakKeyDictionary[Graph, _GraphMasks] = weakref.WeakKeyDictionary()


def _masks(graph: Graph) -> _GraphMasks:
    return _MASKS.setdefault(graph, _GraphMasks())


def additive_mask(b: Builder, keep: Value, dtype: DType) -> Value:
    """``select(keep, 0, fill)`` in ``dtype`` on ``keep``'s shape, with a fill no other
    additive mask of the graph has; the same one for the same ``keep``."""
    masks = _masks(b.graph)
    key = (keep, dtype)
    if key not in masks.addends:
        fill = nth_fill(dtype, len(masks.addends) + 1)
        masks.addends[key] = b.op("select", keep, scalar(b, 0.0, dtype), scalar(b, fill, dtype))
    return masks.addends[key]


def both_keep(b: Builder, keep: Value, other: Value) -> Value:
    """``keep and other``, built once per pair (every layer of a causal model with a
    padding mask shares it, and so its additive mask)."""
    masks = _masks(b.graph)
    key = (keep, other)
    if key not in masks.combined:
        masks.combined[key] = b.op("and", keep, other)
    return masks.combined[key]


def masked_scores(b: Builder, scores: Value, keep: Value | None, bias: Value | None) -> Value:
    """``scores`` where ``keep`` (bool) is True, the lowest float elsewhere (in effect),
    plus ``bias``: one ``add`` of ``additive_mask(keep) + bias`` for f32/f64 scores, a
    ``select`` then an ``add`` for the others."""
    dt = scores.type.dtype
    if keep is not None and dt in ADD_FORM_DTYPES:
        mask = additive_mask(b, keep, dt)
        if bias is not None:
            mask = b.op("add", mask, bias)
        return b.op("add", scores, mask)
    if keep is not None:
        scores = b.op("select", keep, scores, scalar(b, lowest(dt), dt))
    if bias is not None:
        scores = b.op("add", scores, bias)
    return scores
