"""Convolutions (all aten spellings), pooling, and im2col/col2im patches."""

from __future__ import annotations

from typing import Any

import numpy as np

from t2n.frontend.context import LoweringContext
from t2n.frontend.helpers import dim_value, squeeze, transpose, unsqueeze
from t2n.frontend.lowering.linalg import matmul
from t2n.frontend.registry import RuleSet
from t2n.ir import Builder, DType, Value

RULES = RuleSet("conv")


def _expand(v: list[int], n: int) -> list[int]:
    return v * n if len(v) == 1 else v


def _same_padding(kernel: list[int], dilation: list[int]) -> list[tuple[int, int]]:
    out = []
    for k, d in zip(kernel, dilation):
        total = d * (k - 1)
        out.append((total // 2, total - total // 2))
    return out


def convolution(
    ctx: LoweringContext, x: Value, w: Value, bias: Value | None, stride: list[int],
    padding: list[int] | str, dilation: list[int], transposed: bool,
    output_padding: list[int], groups: int,
) -> Value:
    spatial = w.rank - 2
    unbatched = x.rank == spatial + 1
    if unbatched:
        x = unsqueeze(ctx.b, x, [0])
    stride, dilation = _expand(stride, spatial), _expand(dilation, spatial)
    kernel = [int(k) for k in w.type.shape[2:]]
    if isinstance(padding, str):
        if transposed:
            raise ctx.unsupported(f"padding={padding!r} on a transposed convolution")
        pads = _same_padding(kernel, dilation) if padding == "same" else [(0, 0)] * spatial
    else:
        pads = [(p, p) for p in _expand(padding, spatial)]
    inputs = [x, w] + ([bias] if bias is not None else [])
    if transposed:
        out = transposed_conv(ctx, x, w, bias, stride, dilation, pads,
                              _expand(output_padding, spatial), groups)
    else:
        out = ctx.b.op("conv", *inputs, stride=tuple(stride), dilation=tuple(dilation),
                       padding=tuple(pads), groups=groups)
    return squeeze(ctx.b, out, [0]) if unbatched else out


def transposed_conv(ctx: LoweringContext, x: Value, w: Value, bias: Value | None, stride: list[int],
                    dilation: list[int], pads: list[tuple[int, int]], output_padding: list[int],
                    groups: int) -> Value:
    """``output_padding`` only moves where the full transposed-conv output is cropped
    (PyTorch crops ``p`` before and ``p - output_padding`` after), which engines agree
    on; the part beyond the full output (``output_padding > p``) is bias alone, added by
    an explicit pad."""
    b = ctx.b
    crop = [(p0, max(p1 - op, 0)) for (p0, p1), op in zip(pads, output_padding)]
    extra = [max(op - p1, 0) for (_, p1), op in zip(pads, output_padding)]
    attrs: dict[str, Any] = dict(stride=tuple(stride), dilation=tuple(dilation), padding=tuple(crop),
                 output_padding=(0,) * len(pads), groups=groups)
    if not any(extra):
        return b.op("deconv", x, w, *([bias] if bias is not None else []), **attrs)
    out = b.op("deconv", x, w, **attrs)
    grow = ((0, 0), (0, 0)) + tuple((0, e) for e in extra)
    out = b.op("pad", out, pads=grow, mode="constant", value=0.0)
    if bias is not None:
        out = b.op("add", out, b.op("reshape", bias, b.ints([-1] + [1] * len(pads))))
    return out


@RULES.rule("aten::_convolution", "aten::convolution")
def _convolution(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    w = ctx.tensor(1, x.type.dtype)
    return convolution(
        ctx, x, w, ctx.optional_tensor(2, x.type.dtype), ctx.ints(3), ctx.ints(4), ctx.ints(5),
        ctx.bool(6), ctx.ints(7), ctx.int(8),
    )


@RULES.rule("aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::_convolution_mode")
def conv_nd(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    w = ctx.tensor(1, x.type.dtype)
    padding = ctx.const("padding")
    pad = padding if isinstance(padding, str) else [int(p) for p in (padding if isinstance(padding, list) else [padding])]
    return convolution(ctx, x, w, ctx.optional_tensor(2, x.type.dtype), ctx.ints("stride"), pad,
                       ctx.ints("dilation"), False, [0], ctx.int("groups"))


@RULES.rule("aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d")
def conv_transpose_nd(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    w = ctx.tensor(1, x.type.dtype)
    return convolution(ctx, x, w, ctx.optional_tensor(2, x.type.dtype), ctx.ints("stride"),
                       ctx.ints("padding"), ctx.ints("dilation"), True, ctx.ints("output_padding"),
                       ctx.int("groups"))


def _pool_geometry(n: int, ceil_mode: bool, kernel: list[int], stride: list[int],
                   padding: list[int], dilation: list[int]) -> list[tuple[int, int]]:
    """Explicit (before, after) padding. With ceil_mode PyTorch counts the windows that
    start before ``L + p`` and end before ``L + 2p + s - 1``; both limits are ``L`` plus a
    constant, so one right padding, ``min(p + s - 1, d(k - 1))``, gives that count at
    every length ``L`` (a dynamic axis stays dynamic)."""
    pads = []
    for i in range(n):
        p, k, s, d = padding[i], kernel[i], stride[i], dilation[i]
        pads.append((p, min(p + s - 1, d * (k - 1)) if ceil_mode else p))
    return pads


def pool_attrs(ctx: LoweringContext, n: int) -> tuple[dict[str, Any], list[int], list[int]]:
    """The attrs of an IR pool op for an aten pool of ``n`` spatial axes (PyTorch's
    kernel_size, stride, padding, dilation, ceil_mode), its kernel and its padding."""
    kernel = _expand(ctx.ints("kernel_size"), n)
    stride = ctx.ints("stride") or kernel
    stride = _expand(stride, n)
    padding = _expand(ctx.ints("padding"), n)
    dilation = _expand(ctx.ints("dilation"), n) if ctx.has("dilation") else [1] * n
    ceil_mode = ctx.bool("ceil_mode")
    pads = _pool_geometry(n, ceil_mode, kernel, stride, padding, dilation)
    attrs: dict[str, Any] = dict(kernel=tuple(kernel), stride=tuple(stride), dilation=tuple(dilation),
                                 padding=tuple(pads))
    return attrs, kernel, padding


def _pool(ctx: LoweringContext, n: int, kind: str) -> Value:
    x = ctx.tensor(0)
    attrs, kernel, padding = pool_attrs(ctx, n)
    pads = attrs["padding"]
    if kind == "max_pool":
        return ctx.b.op(kind, x, **attrs)
    divisor = ctx.optional("divisor_override") if ctx.has("divisor_override") else None
    include = ctx.bool("count_include_pad") or divisor is not None
    extended = any(a != p for (_, a), p in zip(pads, padding))
    if not include or (not extended and divisor is None):
        return ctx.b.op(kind, x, count_include_pad=include, **attrs)
    if divisor is not None:
        # the engines' 'constant' border divides by the whole window
        window_sum = ctx.b.op("mul", ctx.b.op(kind, x, count_include_pad=True, **attrs),
                              ctx.as_value(float(np.prod(kernel)), x.type.dtype))
        return ctx.b.op("div", window_sum, ctx.as_value(float(divisor), x.type.dtype))
    # ceil_mode with count_include_pad: PyTorch divides by the window's cells inside the
    # input and its explicit padding, not the ceil extension: pad explicitly, then let
    # 'ignore' count the cells inside the padded tensor (exact at every length)
    lead = x.rank - n
    xp = ctx.b.op("pad", x, pads=((0, 0),) * lead + tuple((p, p) for p in padding),
                  mode="constant", value=0.0)
    attrs["padding"] = tuple((0, a - p) for (_, a), p in zip(pads, padding))
    return ctx.b.op(kind, xp, count_include_pad=False, **attrs)


@RULES.rule("aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d")
def max_pool(ctx: LoweringContext) -> Value:
    return _pool(ctx, int(ctx.kind[-2]), "max_pool")


@RULES.rule("aten::avg_pool1d", "aten::avg_pool2d", "aten::avg_pool3d")
def avg_pool(ctx: LoweringContext) -> Value:
    return _pool(ctx, int(ctx.kind[-2]), "avg_pool")


def adaptive_windows(size: int, out: int) -> list[tuple[int, int]]:
    """PyTorch's adaptive pooling windows: [floor(i*L/out), ceil((i+1)*L/out))."""
    return [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]


def adaptive_pool(ctx: LoweringContext, x: Value, n: int, out_size: list[int | None], reduce: str) -> Value:
    """Averages or maxima over PyTorch's adaptive windows (both separable over axes).

    Axes pooled to one cell are reduced together, by one reduction (it reads no size, so
    such an axis may be dynamic). When every other pooled axis is a multiple of its output
    size, the windows tile it evenly and all of them are one pooling op (window = stride =
    size / output), the op tract's ONNX loader builds for the same layer: written per axis
    as slices, reductions and a concatenation, it ran 1.3-49x slower than that op over
    the artifact-speed grid (``--cases "adaptive"``: 49x at 4 x 4 cells of a 64-channel
    32² map, batch 8; benchmarks/RESULTS_ARTIFACT_SPEED.md). Windows that do not tile the
    axis but still have one size and a constant stride (:func:`regular_windows`) are that
    op too (7 x 7 cells of a 256-channel 8² map, batch 8: 28 ms as slices, 0.3 ms for
    torch_to_nnef's pool, whose output shape is wrong there). Other axes keep the slices,
    one axis at a time (the ONNX exporter refuses them all)."""
    b = ctx.b
    whole, pooled = [], []
    for i, o in enumerate(out_size):
        axis = x.rank - n + i
        if o is None:
            continue
        if o == 1:
            whole.append(axis)
            continue
        # the windows need the axis' size: read through the graph, so that DynamicAxes
        # reports it if the axis is made dynamic
        size = int(ctx.to_const(dim_value(b, x, axis), f"size of axis {axis} (adaptive pooling windows)"))
        if o != size:
            pooled.append((axis, size, o))
    size_1d = x.type.shape[-1]
    if whole and n == 1 and reduce == "max_reduce" and isinstance(size_1d, int) and ctx.lowering.static_sizes:
        # the maximum of a whole 1-D axis as a max pool of its length (tract's ONNX loader
        # builds the same): 0.61x the max_reduce after a conv (16 channels of 8, batch 8),
        # 0.98x at 128 positions; over 2-D and 3-D maps the pool ran 1.13-9.8x slower
        # than the reduction (artifact-speed grid, ``kind=adaptive_max`` ``out=1`` cells);
        # an axis that may become dynamic keeps the reduction, which reads no size
        x = b.op("max_pool", x, kernel=(size_1d,), stride=(size_1d,), dilation=(1,), padding=((0, 0),))
    elif whole:
        x = b.op(reduce, x, axes=tuple(whole), keepdims=True)
    regular = [(axis, r) for axis, size, o in pooled if (r := regular_windows(size, o)) is not None]
    if regular:
        kernel, stride = [1] * n, [1] * n
        for axis, (k, step) in regular:
            kernel[axis - (x.rank - n)], stride[axis - (x.rank - n)] = k, step
        attrs: dict[str, Any] = dict(kernel=tuple(kernel), stride=tuple(stride), dilation=(1,) * n,
                                     padding=((0, 0),) * n)
        if reduce == "mean_reduce":
            x = b.op("avg_pool", x, count_include_pad=False, **attrs)
        else:
            x = b.op("max_pool", x, **attrs)
    done = {axis for axis, _ in regular}
    for axis, size, o in reversed(pooled):  # the last axis first: its product is the cheapest
        if axis not in done:
            x = uneven_windows(b, x, n, axis, size, o, reduce)
    return x


def uneven_windows(b: Builder, x: Value, n: int, axis: int, size: int, out: int, reduce: str) -> Value:
    """Windows of two sizes along ``axis`` (PyTorch's adaptive windows that do not tile
    it): averages are one matrix product by the (size, out) matrix of 1 / window size
    over each window; maxima one gather of every window's positions, each window padded
    to the longest by repeating its last position, then one max pool (window = stride =
    the longest). A slice and a reduction per window and a concatenation ran 1.1-17x
    slower and loaded 3-400x slower (1 s for 32³ -> 7³) than these forms
    (artifact-speed grid, ``out=7`` cells of ``kind=adaptive_avg`` and
    ``kind=adaptive_max``, where no peer gives PyTorch's output;
    benchmarks/RESULTS_ARTIFACT_SPEED.md); a gather and a sum pool along one axis ran
    3x slower than the product for averages. Every axis is moved last, so that the
    product is one 2-D matrix product with the map's other axes as its rows and the
    windows' matrix as its right operand: with the constant on the left for the axis
    before the last (a batch of (out, size) x (size, out) products) the 32³ -> 7³ map
    (batch 8) ran 0.70 ms against 0.46, 32² -> 7² even (256 channels: 6.1-9.4 ms against
    6.0-7.8; the slices 13.4-14.8, interleaved in one process, load average 8-9)."""
    windows = adaptive_windows(size, out)
    dt = x.type.dtype
    if reduce == "mean_reduce":
        weights = np.zeros((size, out), dtype=dt.numpy)
        for i, (start, end) in enumerate(windows):
            weights[start:end, i] = 1.0 / (end - start)
        last = x.rank - 1
        perm = list(range(x.rank))
        perm[axis], perm[last] = last, axis
        return transpose(b, matmul(b, transpose(b, x, perm), b.const(weights, dt)), perm)
    longest = max(end - start for start, end in windows)
    index = np.array([[min(start + k, end - 1) for k in range(longest)] for start, end in windows],
                     dtype=np.int64).reshape(-1)
    gathered = b.op("gather", x, b.const(index, DType.I64), axis=axis)
    kernel = [1] * n
    kernel[axis - (x.rank - n)] = longest
    return b.op("max_pool", gathered, kernel=tuple(kernel), stride=tuple(kernel), dilation=(1,) * n,
                padding=((0, 0),) * n)


def regular_windows(size: int, out: int) -> tuple[int, int] | None:
    """(window, stride) when PyTorch's adaptive windows of an axis all have one size and
    start at multiples of one stride (always when ``out`` divides ``size``; also e.g. 8 -> 7
    cells: windows of 2 at stride 1, 512 -> 7: 74 at stride 73), so that one pooling op
    computes them."""
    windows = adaptive_windows(size, out)
    k, step = windows[0][1] - windows[0][0], windows[1][0] - windows[0][0] if out > 1 else 1
    if all(end - start == k and start == i * step for i, (start, end) in enumerate(windows)):
        return k, max(step, 1)
    return None


def adaptive_sizes(ctx: LoweringContext, n: int) -> list[int | None]:
    raw = ctx.const(1)
    sizes = [raw] if isinstance(raw, int) or raw is None else list(raw)
    return sizes * n if len(sizes) == 1 else sizes


@RULES.rule("aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d", "aten::adaptive_avg_pool3d",
            "aten::_adaptive_avg_pool2d", "aten::_adaptive_avg_pool3d")
def adaptive_avg_pool(ctx: LoweringContext) -> Value:
    n = int(ctx.kind.rstrip("d")[-1])
    return adaptive_pool(ctx, ctx.tensor(0), n, adaptive_sizes(ctx, n), "mean_reduce")


# -- patches (im2col / col2im) as convolutions with an identity kernel -------------

def _pairs(ctx: LoweringContext, key: int) -> list[int]:
    v = ctx.ints(key)
    return v * 2 if len(v) == 1 else v


def _identity_kernel(channels: int, kh: int, kw: int, dtype: DType) -> np.ndarray:
    """[C*kh*kw, 1, kh, kw]: output channel c*K + k copies kernel offset k of channel c."""
    k = kh * kw
    w = np.zeros((channels * k, 1, kh, kw), dtype=dtype.numpy)
    for c in range(channels):
        for i in range(k):
            w[c * k + i, 0, i // kw, i % kw] = 1
    return w


@RULES.rule("aten::im2col")
def im2col(ctx: LoweringContext) -> Value:
    """``nn.Unfold``: a grouped convolution by a one-hot kernel puts each window offset
    of each channel in its own output channel (exact: one product by 1 per output)."""
    x = ctx.tensor(0)
    (kh, kw), dil, pad, stride = _pairs(ctx, 1), _pairs(ctx, 2), _pairs(ctx, 3), _pairs(ctx, 4)
    unbatched = x.rank == 3
    b = ctx.b
    if unbatched:
        x = b.op("unsqueeze", x, axes=(0,))
    c = x.type.shape[1]
    if not isinstance(c, int):
        raise ctx.unsupported("unfold over a dynamic channel axis")
    w = b.const(_identity_kernel(c, kh, kw, x.type.dtype), x.type.dtype)
    y = b.op("conv", x, w, stride=tuple(stride), dilation=tuple(dil),
             padding=((pad[0], pad[0]), (pad[1], pad[1])), groups=c)
    dims = list(y.type.shape)
    out = b.op("reshape", y, b.ints([dims[0], dims[1], dims[2] * dims[3]]))
    return b.op("squeeze", out, axes=(0,)) if unbatched else out


@RULES.rule("aten::col2im")
def col2im(ctx: LoweringContext) -> Value:
    """``nn.Fold``, the adjoint of unfold: the same one-hot kernel in a grouped transposed
    convolution sums every window's values back into place."""
    cols = ctx.tensor(0)
    (h, w_), (kh, kw) = _pairs(ctx, 1), _pairs(ctx, 2)
    dil, pad, stride = _pairs(ctx, 3), _pairs(ctx, 4), _pairs(ctx, 5)
    b = ctx.b
    unbatched = cols.rank == 2
    if unbatched:
        cols = b.op("unsqueeze", cols, axes=(0,))
    ck = cols.type.shape[1]
    if not isinstance(ck, int) or ck % (kh * kw):
        raise ctx.unsupported("fold with a dynamic or non-divisible channel axis")
    c = ck // (kh * kw)
    oh = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w_ + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    grid = b.op("reshape", cols, b.ints([cols.type.shape[0], ck, oh, ow]))
    weight = b.const(_identity_kernel(c, kh, kw, cols.type.dtype), cols.type.dtype)
    full_h = (oh - 1) * stride[0] + dil[0] * (kh - 1) + 1
    full_w = (ow - 1) * stride[1] + dil[1] * (kw - 1) + 1
    after = (full_h - pad[0] - h, full_w - pad[1] - w_)
    crop = ((pad[0], max(after[0], 0)), (pad[1], max(after[1], 0)))
    y = b.op("deconv", grid, weight, stride=tuple(stride), dilation=tuple(dil), padding=crop,
             output_padding=(0, 0), groups=c)
    if min(after) < 0:  # positions no window reaches stay zero
        y = b.op("pad", y, pads=((0, 0), (0, 0), (0, max(-after[0], 0)), (0, max(-after[1], 0))),
                 mode="constant", value=0.0)
    return b.op("squeeze", y, axes=(0,)) if unbatched else y
