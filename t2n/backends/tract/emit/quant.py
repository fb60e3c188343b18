"""tract's emitters for quantized ops (Khronos NNEF refuses them: :mod:`t2n.backends.khronos.refusals`).

Activations stay plain ``u8``/``i8`` tensors in tract, their scale and zero point written
on the ops that read them, so every step is explicit in graph.nnef:

* ``quantize``: ``min(max(round_even(x * (1/scale) + zero_point), lo), hi)`` then a cast
  (the zero point added before rounding, as fbgemm and qnnpack do);
* ``dequantize``: ``(cast(q, f32) - zero_point) * scale``;
* ``qconv``/``qlinear``: ``tract_core_qconv`` (i32 accumulation, requantized by tract),
  a linear being a 1-d convolution of ``[N, K, 1]`` by ``[O, K, 1]``. In tract's
  operator, ``a`` is the filter and ``b`` the input (its matmul naming); a per-channel
  weight scale is a 1-d tensor; the filter count is the ``groups`` attribute.

Per-tensor weights are also listed in graph.quant (:func:`t2n.backends.nnef.emit.quant.graph_quant_text`).
"""

from __future__ import annotations

import numpy as np

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw, nnef_float
from t2n.ir import DType, Op, Value
from t2n.ir.tensor_data import ArrayData

TRACT = EmitterTable("quant/tract")


_RANGES = {DType.U8: (0, 255), DType.I8: (-128, 127)}


def _f32(x: float) -> Raw:
    return Raw(nnef_float(float(np.float32(x))))


@TRACT.emitter("quantize")
def quantize(ctx: EmitContext, op: Op) -> None:
    a = op.attrs
    dtype = DType(a["dtype"])
    lo, hi = _RANGES[dtype]
    inv = np.float32(1.0) / np.float32(a["scale"])
    base = op.output.name
    scaled = ctx.emit(f"{base}_scaled", "mul", ctx.arg(op.inputs[0]), _f32(float(inv)))
    shifted = ctx.emit(f"{base}_shift", "add", Raw(scaled), _f32(a["zero_point"]))
    rounded = ctx.emit(f"{base}_round", "tract_core_round_even", Raw(shifted))
    low = ctx.emit(f"{base}_lo", "max", Raw(rounded), _f32(lo))
    high = ctx.emit(f"{base}_hi", "min", Raw(low), _f32(hi))
    ctx.emit(op.output, "tract_core_cast", Raw(high), to=dtype.value)


@TRACT.emitter("dequantize")
def dequantize(ctx: EmitContext, op: Op) -> None:
    a = op.attrs
    base = op.output.name
    real = ctx.emit(f"{base}_f32", "tract_core_cast", ctx.arg(op.inputs[0]), to="f32")
    centered = ctx.emit(f"{base}_centered", "sub", Raw(real), _f32(a["zero_point"]))
    ctx.emit(op.output, "mul", Raw(centered), _f32(a["scale"]))


def _weight_scale(ctx: EmitContext, op: Op) -> Raw:
    scales = op.attrs["w_scales"]
    if len(scales) == 1:
        return _f32(scales[0])
    name = ctx.fresh(f"{op.inputs[1].name}_scales")
    data = ArrayData(np.asarray(scales, dtype=np.float32))
    ctx.variable_line(name, data, f"{op.inputs[1].name}_scales", DType.F32)
    return Raw(name)


def _qconv_call(ctx: EmitContext, op: Op, out: Value | str, x: str, w: str, spatial: int) -> str:
    a = op.attrs
    geometry = dict(
        stride=list(a.get("stride", [1] * spatial)), dilation=list(a.get("dilation", [1] * spatial)),
        padding=Raw("[" + ", ".join(f"({p}, {q})" for p, q in a.get("padding", [(0, 0)] * spatial)) + "]"),
        groups=int(a.get("groups", 1)),
    )
    dtype = DType(a["dtype"])
    relu = bool(a.get("relu", False))
    target = f"{op.output.name}_norelu" if relu else out
    y = ctx.emit(
        target, "tract_core_qconv", Raw(x), Raw(w), ctx.arg(op.inputs[2]), border="constant",
        b0=int(a["x_zero_point"]), b_scale=_f32(a["x_scale"]), a0=int(a["w_zero_point"]),
        a_scale=_weight_scale(ctx, op), c0=int(a["y_zero_point"]), c_scale=_f32(a["y_scale"]),
        output_dt=dtype.value, **geometry,
    )
    if not relu:
        return y
    zero = ctx.emit(f"{op.output.name}_zp", "tract_core_cast", Raw(str(int(a["y_zero_point"]))), to=dtype.value)
    return ctx.emit(out, "max", Raw(y), Raw(zero))


@TRACT.emitter("qconv")
def qconv(ctx: EmitContext, op: Op) -> None:
    x, w = op.inputs[:2]
    _qconv_call(ctx, op, op.output, ctx.arg(x), ctx.arg(w), x.rank - 2)


@TRACT.emitter("qlinear")
def qlinear(ctx: EmitContext, op: Op) -> None:
    x, w = op.inputs[:2]
    k, n_out = w.type.shape[1], w.type.shape[0]
    base = op.output.name
    rows = ctx.emit(f"{base}_rows", "reshape", ctx.arg(x), shape=[-1, k, 1])
    filt = ctx.emit(f"{w.name}_k1", "reshape", ctx.arg(w), shape=[n_out, k, 1])
    y = _qconv_call(ctx, op, f"{base}_conv", rows, filt, 1)
    ctx.emit(op.output, "reshape", Raw(y), shape=list(op.output.type.shape))

