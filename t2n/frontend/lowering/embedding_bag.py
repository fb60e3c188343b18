"""``nn.EmbeddingBag``: sums, means or maxima of embedding rows over bags of indices.

Bags are given at run time by ``offsets``, so they become a membership matrix
(bag × index position) built by comparing positions with the bag bounds; sums and
means are then one matmul with the gathered rows. Positions and bounds are compared
as reals (exact below 2^24), which standard NNEF can do and integers it cannot.
"""

from __future__ import annotations

from t2n.frontend.context import LoweringContext
from t2n.frontend.helpers import dim_value, scalar, unsqueeze
from t2n.frontend.lowering.attention import lowest
from t2n.frontend.lowering.linalg import matmul
from t2n.frontend.registry import RuleSet
from t2n.ir import Builder, DType, Value
from t2n.ir.infer_utils import INT64_MAX

RULES = RuleSet("embedding_bag")

SUM, MEAN, MAX = 0, 1, 2


def _take(b: Builder, x: Value, start: int, stop: int) -> Value:
    return b.op("slice", x, b.ints([start]), b.ints([stop]), axes=(0,), steps=(1,))


def bag_membership(b: Builder, indices: Value, offsets: Value, include_last_offset: bool) -> Value:
    """Bool [bags, N]: whether index position i belongs to bag j, that is
    offsets[j] <= i < offsets[j + 1] (the last bag runs to N unless
    ``include_last_offset`` says the last offset closes it)."""
    n = dim_value(b, indices, 0)
    pos = b.cast(b.op("range", b.const(0, DType.I64), n, b.const(1, DType.I64)), DType.F32)
    off = b.cast(offsets, DType.F32)
    if include_last_offset:
        starts, ends = _take(b, off, 0, -1), _take(b, off, 1, INT64_MAX)
    else:
        starts = off
        ends = b.op("concat", _take(b, off, 1, INT64_MAX), b.op("reshape", b.cast(n, DType.F32), b.ints([1])),
                    axis=0)
    row = unsqueeze(b, pos, [0])
    return b.op("and", b.op("ge", row, unsqueeze(b, starts, [1])), b.op("lt", row, unsqueeze(b, ends, [1])))


@RULES.rule("aten::embedding_bag", "aten::_embedding_bag")
def embedding_bag(ctx: LoweringContext) -> tuple[Value, None, None, None]:
    """Modes sum (with optional ``per_sample_weights``), mean and max; indices equal to
    ``padding_idx`` count in no bag; an empty bag gives zeros. Only the first output
    (the bags) is computed: the other three serve PyTorch's backward pass."""
    weight = ctx.tensor(0)
    indices = ctx.tensor(1)
    if indices.rank != 1:
        raise ctx.unsupported(f"embedding_bag with {indices.rank}-D indices (F.embedding_bag flattens them)")
    offsets = ctx.tensor(2)
    mode = ctx.int(4)
    psw = ctx.optional_tensor(6, weight.type.dtype) if ctx.n_inputs > 6 else None
    include_last = ctx.bool(7) if ctx.n_inputs > 7 else False
    padding_idx = None if ctx.n_inputs <= 8 or ctx.is_none(8) else ctx.int(8)
    if ctx.kind == "aten::_embedding_bag" and padding_idx is not None and padding_idx < 0:
        padding_idx = None  # -1 means none there
    if mode not in (SUM, MEAN, MAX):
        raise ctx.unsupported(f"embedding_bag mode {mode}")
    if psw is not None and mode != SUM:
        raise ctx.unsupported("per_sample_weights with a mode other than sum")
    b = ctx.b
    dt = weight.type.dtype
    rows = b.op("gather", weight, b.cast(indices, DType.I64), axis=0)  # [N, E]
    member = bag_membership(b, indices, offsets, include_last)
    if padding_idx is not None:
        real = b.op("ne", b.cast(indices, DType.F32), scalar(b, float(padding_idx), DType.F32))
        member = b.op("and", member, unsqueeze(b, real, [0]))
    if mode == MAX:
        picked = b.op("select", unsqueeze(b, member, [2]), unsqueeze(b, rows, [0]), scalar(b, lowest(dt), dt))
        out = b.op("max_reduce", picked, axes=(1,), keepdims=False)
        filled = b.op("any_reduce", member, axes=(1,), keepdims=True)
        return b.op("select", filled, out, scalar(b, 0.0, dt)), None, None, None
    weights = b.cast(member, dt)
    if psw is not None:
        weights = b.op("mul", weights, unsqueeze(b, psw, [0]))
    out = matmul(b, weights, rows)
    if mode == MEAN:
        count = b.op("sum_reduce", weights, axes=(1,), keepdims=True)
        out = b.op("div", out, b.op("max", count, scalar(b, 1.0, dt)))
    return out, None, None, None
