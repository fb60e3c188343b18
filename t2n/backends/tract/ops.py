"""IR ops for tract's own forms of two computations, made only by the passes of
:mod:`t2n.backends.tract.passes` for a ``TractNNEF`` that asks for them.

``tract_sdpa(q, k, v[, mask]) {scale}``: softmax(q kᵀ · scale + mask) v, one
``tract_transformers_sdpa`` in graph.nnef (``mask`` additive, broadcast like the scores).
``tract_debox(x) {factors}``: every element repeated ``factors[i]`` times along each
axis ``i`` (nearest upsampling by integer factors), one ``debox`` in graph.nnef.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from t2n.ir import InferContext, OpSet, OpTable, TensorType
from t2n.ir.infer_utils import tensor

TRACT_FORMS = OpTable("tract_forms")


def _sdpa_eval(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> list[np.ndarray]:
    q, k, v = (x.astype(np.float64) for x in xs[:3])
    scale = attrs["scale"]
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if len(xs) > 3:
        scores = scores + xs[3].astype(np.float64)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs = scores / scores.sum(axis=-1, keepdims=True)
    return [np.matmul(probs, v).astype(xs[0].dtype)]


@TRACT_FORMS.op("tract_sdpa", evaluate=_sdpa_eval)
def _sdpa(ctx: InferContext) -> list[TensorType]:
    """Output: q's type with v's last axis."""
    q, _, v = ctx.types[:3]
    return [tensor(q.dtype, [*q.shape[:-1], v.shape[-1]])]


def _debox_eval(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> list[np.ndarray]:
    out = xs[0]
    for axis, factor in enumerate(attrs["factors"]):
        out = np.repeat(out, int(factor), axis=axis)
    return [out]


@TRACT_FORMS.op("tract_debox", evaluate=_debox_eval)
def _debox(ctx: InferContext) -> list[TensorType]:
    """Output: x's type with each axis ``factors[axis]`` times longer."""
    (x,) = ctx.types
    factors = [int(f) for f in ctx.attrs["factors"]]
    return [tensor(x.dtype, [d * f if f != 1 else d for d, f in zip(x.shape, factors)])]


def with_tract_forms(opset: OpSet) -> OpSet:
    """``opset`` with the ops above (unchanged if it has them)."""
    return opset if "tract_sdpa" in opset else opset.extended(TRACT_FORMS)
