"""Neural-network ops: matmul, convolution, pooling, softmax."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from t2n.ir.attributes import BOOL, INT, INTS, PAIRS, optional, required
from t2n.ir.dims import Dim
from t2n.ir.infer_utils import InferError, broadcast_shapes, norm_axis, same_dtype, tensor
from t2n.ir.schema import InferContext, OpTable
from t2n.ir.types import TensorType

TABLE = OpTable("nn")


def _eval_matmul(xs: Sequence[np.ndarray], a: Mapping[str, Any]) -> list[np.ndarray]:
    x, y = xs
    if a.get("transpose_a"):
        x = np.swapaxes(x, -1, -2)
    if a.get("transpose_b"):
        y = np.swapaxes(y, -1, -2)
    return [np.matmul(x, y).astype(xs[0].dtype)]


@TABLE.op("matmul", evaluate=_eval_matmul,
          attrs={"transpose_a": optional(BOOL, False), "transpose_b": optional(BOOL, False)})
def _matmul(ctx: InferContext) -> list[TensorType]:
    """numpy matmul of rank>=2 operands with batch broadcasting; optional transposes of
    the last two axes (attrs transpose_a, transpose_b)."""
    dtype = same_dtype(ctx, "matmul")
    a, b = (list(t.shape) for t in ctx.types)
    if len(a) < 2 or len(b) < 2:
        raise InferError("matmul: operands must have rank >= 2 (the frontend adds unit axes)")
    if ctx.attrs.get("transpose_a"):
        a[-1], a[-2] = a[-2], a[-1]
    if ctx.attrs.get("transpose_b"):
        b[-1], b[-2] = b[-2], b[-1]
    if isinstance(a[-1], int) and isinstance(b[-2], int) and a[-1] != b[-2]:
        raise InferError(f"matmul: inner sizes {a[-1]} and {b[-2]} differ")
    batch = broadcast_shapes(a[:-2], b[:-2])
    return [tensor(dtype, [*batch, a[-2], b[-1]])]


def conv_out_dim(size: Dim, k: int, stride: int, dilation: int, before: int, after: int) -> Dim:
    return (size + before + after - dilation * (k - 1) - 1) // stride + 1


WINDOW_ATTRS = {"stride": required(INTS), "dilation": required(INTS), "padding": required(PAIRS)}
"""The geometry of a convolution or pooling window, one entry per spatial axis."""
CONV_ATTRS = {**WINDOW_ATTRS, "groups": required(INT)}
POOL_ATTRS = {**WINDOW_ATTRS, "kernel": required(INTS)}


@TABLE.op("conv", attrs=CONV_ATTRS)
def _conv(ctx: InferContext) -> list[TensorType]:
    """conv(x, w[, b]): x is N,C,spatial...; w is O,C/groups,k...; attrs stride, dilation,
    padding ((before, after) per spatial axis), groups. Bias has shape [O]."""
    x, w = ctx.types[0], ctx.types[1]
    spatial = x.rank - 2
    st, dl, pad = ctx.attrs["stride"], ctx.attrs["dilation"], ctx.attrs["padding"]
    if not (len(st) == len(dl) == len(pad) == spatial == w.rank - 2):
        raise InferError("conv: stride/dilation/padding must have one entry per spatial axis")
    out = [x.shape[0], w.shape[0]]
    for i in range(spatial):
        k = w.shape[2 + i]
        if not isinstance(k, int):
            raise InferError("conv: kernel sizes must be static")
        out.append(conv_out_dim(x.shape[2 + i], k, st[i], dl[i], *pad[i]))
    return [tensor(x.dtype, out)]


@TABLE.op("deconv", attrs={**WINDOW_ATTRS, "groups": optional(INT, 1), "output_padding": optional(INTS)})
def _deconv(ctx: InferContext) -> list[TensorType]:
    """Transposed convolution deconv(x, w[, b]): w is C_in,O/groups,k...; attrs stride,
    dilation, padding ((before, after) removed from the full output), output_padding, groups."""
    x, w = ctx.types[0], ctx.types[1]
    spatial = x.rank - 2
    st, dl, pad = ctx.attrs["stride"], ctx.attrs["dilation"], ctx.attrs["padding"]
    opad = ctx.attrs.get("output_padding", (0,) * spatial)
    out: list[Dim] = [x.shape[0], w.shape[1] * ctx.attrs.get("groups", 1)]
    for i in range(spatial):
        k = w.shape[2 + i]
        if not isinstance(k, int):
            raise InferError("deconv: kernel sizes must be static")
        size = x.shape[2 + i]
        out.append((size - 1) * st[i] - pad[i][0] - pad[i][1] + dl[i] * (k - 1) + opad[i] + 1)
    return [tensor(x.dtype, out)]


def _pool_infer(ctx: InferContext) -> list[TensorType]:
    x = ctx.types[0]
    k, st, dl, pad = (ctx.attrs[n] for n in ("kernel", "stride", "dilation", "padding"))
    spatial = len(k)
    lead = x.rank - spatial
    out = list(x.shape[:lead])
    for i in range(spatial):
        out.append(conv_out_dim(x.shape[lead + i], k[i], st[i], dl[i], *pad[i]))
    return [tensor(x.dtype, out)]


TABLE.op(
    "max_pool",
    doc="Max over windows of the trailing len(kernel) axes; attrs kernel, stride, dilation, "
    "padding (padded cells never win).",
    attrs=POOL_ATTRS,
)(_pool_infer)
TABLE.op(
    "avg_pool",
    doc="Average over windows; attrs kernel, stride, dilation, padding, count_include_pad "
    "(whether padded cells count in the divisor).",
    attrs={**POOL_ATTRS, "count_include_pad": optional(BOOL, True)},
)(_pool_infer)


def _softmax_eval(xs: Sequence[np.ndarray], a: Mapping[str, Any], log: bool) -> list[np.ndarray]:
    x = xs[0].astype(np.float64)
    axes = tuple(a["axes"])
    m = np.max(x, axis=axes, keepdims=True)
    e = np.exp(x - m)
    s = np.sum(e, axis=axes, keepdims=True)
    out = (x - m - np.log(s)) if log else e / s
    return [out.astype(xs[0].dtype)]


def _softmax_infer(ctx: InferContext) -> list[TensorType]:
    for ax in ctx.attrs["axes"]:
        norm_axis(ax, ctx.types[0].rank)
    return [ctx.types[0]]


TABLE.op("softmax", evaluate=lambda xs, a: _softmax_eval(xs, a, False),
         doc="Softmax over the non-negative ``axes``.", attrs={"axes": required(INTS)})(_softmax_infer)
TABLE.op("log_softmax", evaluate=lambda xs, a: _softmax_eval(xs, a, True),
         doc="Log-softmax over the non-negative ``axes``.", attrs={"axes": required(INTS)})(_softmax_infer)
