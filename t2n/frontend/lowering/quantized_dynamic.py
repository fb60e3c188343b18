"""Dynamic quantized linear (``torch.ao.nn.quantized.dynamic.Linear``, qint8 weights).

PyTorch quantizes the input on every call with parameters chosen from its range
(``ChooseQuantizationParams``: the range widened to hold 0, ``scale = (max - min) /
(qmax - qmin)``, the zero point taken from the end with the smaller error, rounded and
clamped; ``qmax`` is 127 instead of 255 with ``reduce_range``), multiplies integers and
scales the i32 sums back to f32. The graph computes the same steps at run time in f32
(the products of 8-bit integers and their sums are exact in f32 up to 2**24), with the
weights kept as i8 and converted in the graph.
"""

from __future__ import annotations

import numpy as np
import torch

from t2n.frontend.context import LoweringContext
from t2n.frontend.lowering.quantized import packed_params, weight_scales
from t2n.frontend.registry import RuleSet
from t2n.ir import DType, Value
from t2n.ir.tensor_data import ArrayData

RULES = RuleSet("quantized_dynamic")


def _runtime_qparams(ctx: LoweringContext, x: Value, qmax: int) -> tuple[Value, Value]:
    """(scale, zero point) of ``x`` as PyTorch's dynamic quantization picks them, as f32 scalars."""
    b = ctx.b

    def f(v: float) -> Value:
        return b.const(np.float32(v), DType.F32)

    axes = tuple(range(x.rank))
    lo = b.op("min", b.op("min_reduce", x, axes=axes, keepdims=False), f(0.0))
    hi = b.op("max", b.op("max_reduce", x, axes=axes, keepdims=False), f(0.0))
    scale = b.op("div", b.op("sub", hi, lo), f(float(qmax)))
    scale = b.op("select", b.op("eq", scale, f(0.0)), f(0.1), scale)
    lo_steps, hi_steps = b.op("div", lo, scale), b.op("div", hi, scale)
    from_min = b.op("neg", lo_steps)
    from_max = b.op("sub", f(float(qmax)), hi_steps)
    err_min = b.op("neg", b.op("abs", lo_steps))
    err_max = b.op("sub", f(float(qmax)), b.op("abs", hi_steps))
    initial = b.op("select", b.op("lt", err_min, err_max), from_min, from_max)
    clamped = b.op("min", b.op("max", initial, f(0.0)), f(float(qmax)))
    return scale, b.op("round", clamped)


@RULES.rule("quantized::linear_dynamic", "quantized::linear_relu_dynamic")
def linear_dynamic(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    if x.type.dtype is not DType.F32:
        raise ctx.unsupported(f"the input is {x.type.dtype.value}; dynamic quantized linear takes f32")
    w, bias = torch.ops.quantized.linear_unpack(packed_params(ctx, 1))
    scales, w_zp = weight_scales(ctx, w)
    if w_zp != 0:
        raise ctx.unsupported("dynamic quantized linear with a non-zero weight zero point is not supported")
    reduce_range = ctx.n_inputs > 2 and ctx.bool(2)
    b = ctx.b
    scale, zp = _runtime_qparams(ctx, x, 127 if reduce_range else 255)
    inv = b.op("div", b.const(np.float32(1.0), DType.F32), scale)
    q = b.op("round", b.op("add", b.op("mul", x, inv), zp))  # zero point added before rounding
    q = b.op("min", b.op("max", q, b.const(np.float32(0.0), DType.F32)),
             b.const(np.float32(255.0), DType.F32))
    where = ctx.loc.module or "model"
    wv = ctx.lowering.parameter(w.int_repr(), f"model.{where}.weight")
    w_real = b.op("dequantize", wv, scale=1.0, zero_point=0)  # not folded: the .dat stays i8
    acc = b.op("matmul", b.op("sub", q, zp), w_real, transpose_b=True)
    n_out = w.shape[0]
    w_scale = np.asarray(scales if len(scales) == n_out else scales * n_out, dtype=np.float32)
    y = b.op("mul", acc, b.op("mul", scale, b.variable(ArrayData(w_scale), f"{where}.weight_scales")))
    if bias is not None:
        y = b.op("add", y, b.variable(ArrayData(bias.detach().float().numpy()), f"{where}.bias"))
    return b.op("relu", y) if ctx.kind == "quantized::linear_relu_dynamic" else y
