"""Convolutions (all aten spellings) and pooling."""

from __future__ import annotations

from typing import Any

from t2n.frontend.context import LoweringContext
from t2n.frontend.helpers import squeeze, unsqueeze
from t2n.frontend.registry import RuleSet
from t2n.ir import Value

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
        out = ctx.b.op("deconv", *inputs, stride=tuple(stride), dilation=tuple(dilation),
                       padding=tuple(pads), output_padding=tuple(_expand(output_padding, spatial)),
                       groups=groups)
    else:
        out = ctx.b.op("conv", *inputs, stride=tuple(stride), dilation=tuple(dilation),
                       padding=tuple(pads), groups=groups)
    return squeeze(ctx.b, out, [0]) if unbatched else out


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


def _pool_geometry(ctx: LoweringContext, x: Value, n: int, ceil_mode: bool, kernel: list[int],
                   stride: list[int], padding: list[int], dilation: list[int]) -> list[tuple[int, int]]:
    """Explicit (before, after) padding; ceil_mode adds the extra right padding PyTorch implies."""
    pads = []
    for i in range(n):
        size = x.type.shape[x.rank - n + i]
        p, k, s, d = padding[i], kernel[i], stride[i], dilation[i]
        after = p
        if ceil_mode:
            if not isinstance(size, int):
                raise ctx.unsupported("ceil_mode pooling over a dynamic axis")
            span = size + 2 * p - d * (k - 1) - 1
            out = -(-span // s) + 1
            if (out - 1) * s >= size + p:
                out -= 1
            after = (out - 1) * s + d * (k - 1) + 1 - size - p
        pads.append((p, max(after, p if not ceil_mode else after)))
    return pads


def _pool(ctx: LoweringContext, n: int, kind: str) -> Value:
    x = ctx.tensor(0)
    kernel = _expand(ctx.ints("kernel_size"), n)
    stride = ctx.ints("stride") or kernel
    stride = _expand(stride, n)
    padding = _expand(ctx.ints("padding"), n)
    dilation = _expand(ctx.ints("dilation"), n) if ctx.has("dilation") else [1] * n
    ceil_mode = ctx.bool("ceil_mode")
    pads = _pool_geometry(ctx, x, n, ceil_mode, kernel, stride, padding, dilation)
    attrs: dict[str, Any] = dict(kernel=tuple(kernel), stride=tuple(stride), dilation=tuple(dilation),
                                    padding=tuple(pads))
    if kind == "avg_pool":
        if ctx.has("divisor_override") and not ctx.is_none("divisor_override"):
            raise ctx.unsupported("divisor_override")
        include = ctx.bool("count_include_pad")
        if ceil_mode and include and any(a != b for a, b in pads):
            raise ctx.unsupported("ceil_mode with count_include_pad=True adds windows PyTorch averages "
                                  "over a partial padded size")
        attrs["count_include_pad"] = include
    return ctx.b.op(kind, x, **attrs)


@RULES.rule("aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d")
def max_pool(ctx: LoweringContext) -> Value:
    return _pool(ctx, int(ctx.kind[-2]), "max_pool")


@RULES.rule("aten::avg_pool1d", "aten::avg_pool2d", "aten::avg_pool3d")
def avg_pool(ctx: LoweringContext) -> Value:
    return _pool(ctx, int(ctx.kind[-2]), "avg_pool")


@RULES.rule("aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d", "aten::adaptive_avg_pool3d")
def adaptive_avg_pool(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    n = int(ctx.kind[-2])
    out_size = _expand(ctx.ints(1), n)
    sizes = list(x.type.shape[x.rank - n:])
    if all(o == 1 for o in out_size):
        return ctx.b.op("mean_reduce", x, axes=tuple(range(x.rank - n, x.rank)), keepdims=True)
    if any(not isinstance(s, int) or s % o for s, o in zip(sizes, out_size)):
        raise ctx.unsupported(f"adaptive pooling from {sizes} to {out_size} (not a divisor)")
    kernel = [int(s) // o for s, o in zip(sizes, out_size)]
    return ctx.b.op("avg_pool", x, kernel=tuple(kernel), stride=tuple(kernel), dilation=(1,) * n,
                    padding=((0, 0),) * n, count_include_pad=True)
