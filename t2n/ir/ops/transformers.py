"""Ops of transformer language models that tract runs as one operation each: made only
by the passes that find their decomposed form in a graph (:mod:`t2n.passes.reify_rope`)
or by an LLM export asking for tract's stateful cache (:mod:`t2n.llm.common.stateful`).

``apply_rope(x, cos, sin)``: ``x * cos + rotate_half(x) * sin``, where
``rotate_half(x) = concat([-x[..., h:], x[..., :h]])`` on the last axis of even size
``2h``; ``cos`` and ``sin`` broadcast against ``x``.

``kv_cache_append(x) {name, axis, past[, bits, per_channel]}``: the keys (or values) of
the tokens seen so far, kept between runs, with ``x`` appended along ``axis``; ``past``
is the symbol of the kept length; ``bits`` (8 or 4): kept quantized, with a scale per
channel (keys) or per token (values). Stateful: never folded, merged or removed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from t2n.ir.attributes import BOOL, INT, NO_ATTRS, STR, optional, required
from t2n.ir.dims import Sym
from t2n.ir.infer_utils import InferError, tensor
from t2n.ir.schema import InferContext, OpTable, Trait
from t2n.ir.types import TensorType

TABLE = OpTable("transformers")


def rotate_half(x: np.ndarray) -> np.ndarray:
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def _eval_rope(xs: Sequence[np.ndarray], attrs: Mapping[str, Any]) -> list[np.ndarray]:
    x, cos, sin = xs
    return [(x * cos + rotate_half(x) * sin).astype(x.dtype)]


@TABLE.op("apply_rope", evaluate=_eval_rope, attrs=NO_ATTRS)
def _apply_rope(ctx: InferContext) -> list[TensorType]:
    """Output: x's type (x float, its last axis of even static size)."""
    x = ctx.types[0]
    last = x.shape[-1] if x.rank else None
    if not x.dtype.is_float or not isinstance(last, int) or last % 2:
        raise InferError("apply_rope: x must be a float tensor whose last axis has an even static size")
    return [x]


@TABLE.op("kv_cache_append", traits=(Trait.STATEFUL,),
          attrs={"name": required(STR), "axis": required(INT), "past": required(STR),
                 "bits": optional(INT, 0), "per_channel": optional(BOOL, False)})
def _kv_cache_append(ctx: InferContext) -> list[TensorType]:
    """Output: x's type with ``past + x.shape[axis]`` along ``axis``."""
    (x,) = ctx.types
    axis = int(ctx.attrs["axis"])
    if not 0 <= axis < x.rank:
        raise InferError(f"kv_cache_append: axis {axis} out of range for rank {x.rank}")
    shape = list(x.shape)
    shape[axis] = Sym(str(ctx.attrs["past"])) + shape[axis]
    return [tensor(x.dtype, shape)]
