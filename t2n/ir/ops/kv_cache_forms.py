"""tract's sliding-window cache and attention as one op: made only by the pass of
:mod:`t2n.llm.common.kv_cache_forms` for a stateful LLM export that asks for it.

``window_kv_sdpa(q, k, v) {window, scale, axis}``: appends this call's keys ``k`` and
values ``v`` (``[B, H_kv, S, D]``) to a cache kept between runs that holds only the
last ``window`` tokens (a ring buffer), and returns ``softmax(q kᵀ · scale) v`` over the
kept tokens, every query attending every kept key (``q``: ``[B, H, S, D]``, ``H`` a
multiple of ``H_kv``). That is the sliding-window attention of one new token (``S ==
1``); a call of several tokens would let each see the later ones. Stateful: never
folded, merged or removed.
"""

from __future__ import annotations

from t2n.ir.attributes import FLOAT, INT, required
from t2n.ir.infer_utils import InferError, tensor
from t2n.ir.schema import InferContext, OpTable, Trait
from t2n.ir.types import TensorType

TABLE = OpTable("kv_cache_forms")


@TABLE.op("window_kv_sdpa", traits=(Trait.STATEFUL,),
          attrs={"window": required(INT), "scale": required(FLOAT), "axis": required(INT)})
def _window_kv_sdpa(ctx: InferContext) -> list[TensorType]:
    """Output: q's type with v's last axis."""
    q, k, v = ctx.types
    if q.rank != 4 or k.rank != 4 or v.rank != 4 or int(ctx.attrs["axis"]) != 2:
        raise InferError("window_kv_sdpa: q, k and v are [B, H, S, D], the tokens on axis 2")
    if int(ctx.attrs["window"]) < 1:
        raise InferError("window_kv_sdpa: the window holds at least one token")
    return [tensor(q.dtype, [*q.shape[:-1], v.shape[-1]])]
