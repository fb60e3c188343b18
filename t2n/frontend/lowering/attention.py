"""Attention: ``scaled_dot_product_attention`` and PyTorch's fused transformer kernels
(the eval-mode fast paths of ``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer``
and ``nn.TransformerEncoder``'s nested tensors), decomposed into matmul + softmax so
that both targets run them.

Masked scores are pushed to (about) the lowest finite float rather than -inf: exp of it
minus the row maximum is exactly 0, and Khronos NNEF has no inf literal. How the mask is
applied (an additive mask or a select) is :mod:`t2n.frontend.lowering.attention_mask`'s.
"""

from __future__ import annotations

import math
import weakref

import attrs
import numpy as np

from t2n.frontend.context import LoweringContext
from t2n.frontend.helpers import dim_value, scalar, transpose, unsqueeze
from t2n.frontend.lowering.attention_mask import both_keep, masked_scores
from t2n.frontend.lowering.attention_mask import (
    lowest as lowest,  # re-exported: other rules mask with it
)
from t2n.frontend.lowering.linalg import matmul
from t2n.frontend.lowering.norm import affine, standardize
from t2n.frontend.lowering.shape import concat_shape, shape_part
from t2n.frontend.registry import RuleSet
from t2n.ir import Builder, Dim, DType, Graph, Value
from t2n.ir.graph import constant_data

RULES = RuleSet("attention")


def may_empty_a_row(mask: Value, keep: bool) -> bool:
    """Whether some row of the mask (its last axis) may leave no position to attend to:
    always for masks computed at run time, only if it does for constant ones."""
    data = constant_data(mask)
    if data is None:
        return True
    data = np.atleast_1d(data)
    dead = ~data.astype(bool) if keep else np.isneginf(data)
    return bool(np.all(dead, axis=-1).any())


def row_zeroing(b: Builder, keep: Value | None, bias: Value | None) -> list[tuple[Value, bool]]:
    """The conditions of the rows that attend to no position: (cond, zero_when) pairs, a
    row is zeroed where ``cond`` is ``zero_when``; none for masks that leave every row a
    position (constant ones, checked)."""
    out: list[tuple[Value, bool]] = []
    if keep is not None and may_empty_a_row(keep, keep=True):
        out.append((b.op("any_reduce", keep, axes=(keep.rank - 1,), keepdims=True), False))
    if bias is not None and may_empty_a_row(bias, keep=False):
        # A row is dead when its mask is -inf everywhere (only -inf is below the lowest
        # float). Asked of the mask, not the scores: tract's max_reduce starts at the
        # lowest float, so a maximum of -inf is never seen there.
        dt = bias.type.dtype
        minus_inf = b.op("lt", bias, scalar(b, lowest(dt), dt))
        out.append((b.op("all_reduce", minus_inf, axes=(bias.rank - 1,), keepdims=True), True))
    return out


def zero_rows(b: Builder, x: Value, zeroing: list[tuple[Value, bool]]) -> Value:
    """``x`` with the rows of ``zeroing`` set to 0 (NaN there included)."""
    zero = scalar(b, 0.0, x.type.dtype)
    for cond, when in zeroing:
        x = b.op("select", cond, zero, x) if when else b.op("select", cond, x, zero)
    return x


def attention_probs(b: Builder, scores: Value, keep: Value | None = None, bias: Value | None = None,
                    *, safe: bool = True) -> Value:
    """softmax over the last axis of ``scores`` where ``keep`` (bool) is True, plus the
    additive ``bias``. With ``safe``, a row left without any position gives zeros,
    as PyTorch's SDPA does, instead of NaN or a uniform average."""
    axis = scores.rank - 1
    probs = b.op("softmax", masked_scores(b, scores, keep, bias), axes=(axis,))
    return zero_rows(b, probs, row_zeroing(b, keep, bias)) if safe else probs


_CAUSAL_MASKS: weakref.WeakKeyDictionary[Graph, dict[tuple[Dim, Dim], Value]] = weakref.WeakKeyDictionary()
"""Causal masks already built in a graph, by (L, S): every layer of a model shares one."""


def causal_keep(b: Builder, q: Value, k: Value) -> Value:
    """Bool [L, S], True where key j <= query i (PyTorch's top-left aligned ``tril``);
    built from ranges so that it follows dynamic sequence lengths."""
    key = (q.type.shape[-2], k.type.shape[-2])
    built = _CAUSAL_MASKS.setdefault(b.graph, {})
    if key in built:
        return built[key]

    def positions(x: Value) -> Value:
        n = dim_value(b, x, x.rank - 2)
        r = b.op("range", b.const(0, DType.I64), n, b.const(1, DType.I64))
        return b.cast(r, DType.F32)  # compared as reals: standard NNEF compares no integers

    built[key] = b.op("ge", unsqueeze(b, positions(q), [1]), unsqueeze(b, positions(k), [0]))
    return built[key]


def repeat_heads(b: Builder, kv: Value, heads: int) -> Value:
    """(…, Hkv, S, E) → (…, heads, S, E), each kv head repeated for its group of query
    heads (``repeat_interleave``, as ``enable_gqa`` does)."""
    axis = kv.rank - 3
    hkv = kv.type.shape[axis]
    if hkv == heads:
        return kv
    if not isinstance(hkv, int) or heads % hkv:
        raise ValueError(f"{heads} query heads cannot share {hkv} key/value heads")
    x = unsqueeze(b, kv, [axis + 1])
    reps = [1] * x.rank
    reps[axis + 1] = heads // hkv
    x = b.op("tile", x, b.ints(reps))
    target = concat_shape(b, [shape_part(b, kv, 0, axis), [heads], shape_part(b, kv, axis + 1, kv.rank)])
    return b.op("reshape", x, target)


def sdpa(b: Builder, q: Value, k: Value, v: Value, *, keep: Value | None = None,
         bias: Value | None = None, causal: bool = False, scale: float | None = None,
         gqa: bool = False, safe: bool = True) -> tuple[Value, Value]:
    """softmax(q kᵀ · scale + mask) v over (…, L, E) × (…, S, E) × (…, S, Ev); returns
    the output and the attention weights."""
    dt = q.type.dtype
    if gqa and q.rank >= 3:
        heads = q.type.shape[q.rank - 3]
        if not isinstance(heads, int):
            raise ValueError("grouped-query attention needs a static number of heads")
        k, v = repeat_heads(b, k, heads), repeat_heads(b, v, heads)
    if scale is not None:
        factor = scalar(b, scale, dt)
    else:
        e = q.type.shape[-1]
        factor = (scalar(b, 1.0 / math.sqrt(e), dt) if isinstance(e, int)
                  else b.op("rsqrt", b.cast(dim_value(b, q, q.rank - 1), dt)))
    scores = matmul(b, b.op("mul", q, factor), k, transpose_b=True)
    if causal:
        tril = causal_keep(b, q, k)
        keep = tril if keep is None else both_keep(b, keep, tril)
    raw = attention_probs(b, scores, keep, bias, safe=False)
    zeroing = row_zeroing(b, keep, bias) if safe else []
    probs = zero_rows(b, raw, zeroing)  # the weights, when asked for (else dropped)
    if zeroing and _fewer(v.type.shape[-1], k.type.shape[-2]):
        # Zeroing the dead rows of the output rather than of the weights costs a select
        # over (…, L, Ev) instead of (…, L, S); each output row reads its own weights row
        # only, so a NaN there stays in a row zeroed after. Attention with a float mask,
        # 8 x 4 heads, L = S = 128, Ev = 64 (artifact-speed grid, `attention mask=float`):
        # 1.49x the ONNX path's time with the select on the weights, 1.03x on the output
        # (the ONNX path has no zeroing and gives NaN for such rows).
        return zero_rows(b, matmul(b, raw, v), zeroing), probs
    return matmul(b, probs, v), probs


def _fewer(ev: Dim, s: Dim) -> bool:
    """Whether an output row (``ev`` values) is no longer than a weights row (``s``)."""
    return isinstance(ev, int) and (not isinstance(s, int) or ev <= s)


@RULES.rule("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_attention_math")
def scaled_dot_product_attention(ctx: LoweringContext) -> Value | tuple[Value, Value]:
    """Bool masks keep where True, float masks add; ``is_causal``, ``scale`` and
    ``enable_gqa`` as in PyTorch; dropout is inference-time identity. Rows that mask
    every position give zeros, like PyTorch."""
    q = ctx.tensor(0)
    dt = q.type.dtype
    k, v = ctx.tensor(1, dt), ctx.tensor(2, dt)
    mask = ctx.optional_tensor(3)
    keep = bias = None
    if mask is not None:
        if mask.type.dtype is DType.BOOL:
            keep = mask
        else:
            bias = ctx.b.cast(mask, dt)
    scale = None if not ctx.has("scale") or ctx.is_none("scale") else ctx.float("scale")
    gqa = ctx.bool("enable_gqa") if ctx.has("enable_gqa") else False
    try:
        out, probs = sdpa(ctx.b, q, k, v, keep=keep, bias=bias, causal=ctx.bool(5), scale=scale, gqa=gqa)
    except ValueError as exc:
        raise ctx.unsupported(str(exc)) from None
    return (out, probs) if ctx.n_outputs == 2 else out


# -- PyTorch's fused transformer kernels -------------------------------------------------


@attrs.frozen
class NestedTensor:
    """A nested tensor made by ``_nested_tensor_from_mask``, kept dense: the padded
    values and which positions are real (bool, batch × sequence). Per-token layers give
    the same results on the real positions; attention masks the padded keys."""

    values: Value
    keep: Value


def linear(b: Builder, x: Value, w: Value, bias: Value | None) -> Value:
    out = matmul(b, x, w, transpose_b=True)
    return b.op("add", out, bias) if bias is not None else out


def take(b: Builder, x: Value, axis: int, start: int, stop: int) -> Value:
    return b.op("slice", x, b.ints([start]), b.ints([stop]), axes=(axis,), steps=(1,))


def in_projection(b: Builder, query: Value, key: Value, value: Value, w: Value,
                  bias: Value | None, e: int) -> tuple[Value, Value, Value]:
    """q, k, v from the packed (3E, E) weight: one matmul when it is self-attention."""
    if query is key and key is value:
        qkv = linear(b, query, w, bias)
        last = qkv.rank - 1
        return take(b, qkv, last, 0, e), take(b, qkv, last, e, 2 * e), take(b, qkv, last, 2 * e, 3 * e)
    outs = []
    for i, x in enumerate((query, key, value)):
        bi = take(b, bias, 0, i * e, (i + 1) * e) if bias is not None else None
        outs.append(linear(b, x, take(b, w, 0, i * e, (i + 1) * e), bi))
    return outs[0], outs[1], outs[2]


def split_heads(b: Builder, x: Value, heads: int) -> Value:
    """(B, L, E) → (B, heads, L, E / heads)."""
    e = x.type.shape[-1]
    assert isinstance(e, int)
    target = concat_shape(b, [shape_part(b, x, 0, 2), [heads, e // heads]])
    return transpose(b, b.op("reshape", x, target), (0, 2, 1, 3))


def merge_heads(b: Builder, x: Value, e: int) -> Value:
    """(B, H, L, D) → (B, L, e = H · D)."""
    t = transpose(b, x, (0, 2, 1, 3))
    return b.op("reshape", t, concat_shape(b, [shape_part(b, t, 0, 2), [e]]))


def fused_mask_keep(b: Builder, mask: Value, mask_type: int | None) -> Value:
    """The keep mask (bool, broadcasting to B, H, L, S) of a fused kernel's mask. The
    kernels mask every non-zero position (their float masks are 0 / -inf made from bool
    masks); type 1 is a key padding mask (B, S), type 0 an (L, S) mask, type 2 one
    that is already (B, H, L, S)."""
    masked = mask if mask.type.dtype is DType.BOOL else b.op("ne", mask, scalar(b, 0.0, mask.type.dtype))
    keep = b.op("not", masked)
    if mask_type == 1:
        return unsqueeze(b, keep, [1, 2])
    return unsqueeze(b, keep, [1]) if keep.rank == 3 else keep


@attrs.frozen
class FusedWeights:
    """The packed in-projection and the out-projection of a fused attention kernel."""

    qkv_w: Value
    qkv_b: Value | None
    proj_w: Value
    proj_b: Value | None


def fused_attention(b: Builder, query: Value, key: Value, value: Value, e: int, heads: int,
                    w: FusedWeights, keep: Value | None) -> tuple[Value, Value]:
    """Multi-head attention as the fused kernels compute it: (output, weights per head).
    A query whose keys are all masked averages the values (PyTorch gives NaN)."""
    q, k, v = in_projection(b, query, key, value, w.qkv_w, w.qkv_b, e)
    out, probs = sdpa(b, split_heads(b, q, heads), split_heads(b, k, heads), split_heads(b, v, heads),
                      keep=keep, safe=False)
    return linear(b, merge_heads(b, out, e), w.proj_w, w.proj_b), probs


def _heads(ctx: LoweringContext, e: int, key: int | str) -> int:
    heads = ctx.int(key)
    if heads <= 0 or e % heads:
        raise ctx.unsupported(f"embedding size {e} in {heads} heads")
    return heads


@RULES.rule("aten::_native_multi_head_attention")
def native_multi_head_attention(ctx: LoweringContext) -> tuple[Value, Value | None]:
    """``nn.MultiheadAttention``'s eval fast path (batch first, packed projection)."""
    query = ctx.tensor(0)
    dt = query.type.dtype
    key, value = ctx.tensor(1, dt), ctx.tensor(2, dt)
    e = ctx.int(3)
    heads = _heads(ctx, e, 4)
    mask = ctx.optional_tensor(9)
    mask_type = None if ctx.is_none(12) else ctx.int(12)
    b = ctx.b
    keep = fused_mask_keep(b, mask, mask_type) if mask is not None else None
    weights = FusedWeights(ctx.tensor(5, dt), ctx.optional_tensor(6, dt), ctx.tensor(7, dt),
                           ctx.optional_tensor(8, dt))
    out, probs = fused_attention(b, query, key, value, e, heads, weights, keep)
    if not ctx.bool(10):
        return out, None
    if ctx.bool(11):
        probs = b.op("mean_reduce", probs, axes=(1,), keepdims=False)
    return out, probs


@RULES.rule("aten::_transformer_encoder_layer_fwd")
def transformer_encoder_layer(ctx: LoweringContext) -> Value | NestedTensor:
    """``nn.TransformerEncoderLayer``'s eval fast path: self-attention and a relu/gelu
    feed-forward block, each with a residual and layer norm (before or after)."""
    src = ctx.raw(0)
    nested = src if isinstance(src, NestedTensor) else None
    x = nested.values if nested is not None else ctx.tensor(0)
    dt = x.type.dtype
    e = ctx.int(1)
    heads = _heads(ctx, e, 2)
    use_gelu, norm_first, eps = ctx.bool(7), ctx.bool(8), ctx.float(9)
    weights = FusedWeights(ctx.tensor(3, dt), ctx.optional_tensor(4, dt), ctx.tensor(5, dt),
                           ctx.optional_tensor(6, dt))
    n1w, n1b, n2w, n2b = (ctx.optional_tensor(i, dt) for i in range(10, 14))
    f1w, f1b, f2w, f2b = ctx.tensor(14, dt), ctx.optional_tensor(15, dt), ctx.tensor(16, dt), \
        ctx.optional_tensor(17, dt)
    b = ctx.b
    mask = ctx.optional_tensor(18) if ctx.n_inputs > 18 else None
    mask_type = None if ctx.n_inputs <= 19 or ctx.is_none(19) else ctx.int(19)
    keep = fused_mask_keep(b, mask, mask_type) if mask is not None else None
    if nested is not None:
        padding = unsqueeze(b, nested.keep, [1, 2])
        keep = padding if keep is None else b.op("and", keep, padding)

    def norm(y: Value, weight: Value | None, bias: Value | None) -> Value:
        return affine(b, standardize(b, y, [y.rank - 1], eps), weight, bias)

    def attend(y: Value) -> Value:
        return fused_attention(b, y, y, y, e, heads, weights, keep)[0]

    def feed_forward(y: Value) -> Value:
        h = linear(b, y, f1w, f1b)
        h = b.op("gelu", h, approximate="none") if use_gelu else b.op("relu", h)
        return linear(b, h, f2w, f2b)

    if norm_first:
        x = b.op("add", x, attend(norm(x, n1w, n1b)))
        x = b.op("add", x, feed_forward(norm(x, n2w, n2b)))
    else:
        x = norm(b.op("add", x, attend(x)), n1w, n1b)
        x = norm(b.op("add", x, feed_forward(x)), n2w, n2b)
    return NestedTensor(x, nested.keep) if nested is not None else x


@RULES.rule("aten::_nested_tensor_from_mask")
def nested_tensor_from_mask(ctx: LoweringContext) -> NestedTensor:
    """The encoder's padded batch as a nested tensor: kept dense, with its keep mask."""
    x = ctx.tensor(0)
    keep = ctx.tensor(1)
    if keep.type.dtype is not DType.BOOL:
        keep = ctx.b.op("ne", keep, scalar(ctx.b, 0, keep.type.dtype))
    if x.rank != 3 or keep.rank != 2:
        raise ctx.unsupported("a nested tensor from anything but a (batch, sequence, features) "
                              "tensor and a (batch, sequence) mask")
    return NestedTensor(x, keep)


@RULES.rule("aten::to_padded_tensor")
def to_padded_tensor(ctx: LoweringContext) -> Value:
    """Back to a dense tensor of the original size, ``padding`` at the padded positions."""
    nested = ctx.raw(0)
    if not isinstance(nested, NestedTensor):
        raise ctx.unsupported("to_padded_tensor of a tensor that is not nested")
    if ctx.is_none(2):
        raise ctx.unsupported("to_padded_tensor without output_size (its size depends on the mask)")
    x = nested.values
    pad = scalar(ctx.b, ctx.float(1), x.type.dtype)
    return ctx.b.op("select", unsqueeze(ctx.b, nested.keep, [2]), x, pad)
