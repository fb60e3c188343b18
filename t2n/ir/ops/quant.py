"""Quantized ops: affine (scale, zero point) quantization of 8-bit tensors.

A quantized tensor is an integer tensor (u8 or i8) whose type carries its
:class:`~t2n.ir.types.QuantInfo`; ``real = (q - zero_point) * scale``. The ops that
need the parameters also hold them as attrs (``x_scale``, ``y_zero_point``…), so a
layout op between them (reshape, transpose), which keeps the integers and drops the
type's ``quant``, loses nothing.

* ``quantize(x)``: ``clamp(round_half_even(x * (1/scale) + zero_point))``, as PyTorch's
  ``quantize_per_tensor`` computes it (in f32, by the reciprocal of the scale, the zero
  point added before rounding).
* ``dequantize(q)``: ``(q - zero_point) * scale`` in f32.

These ops have no evaluator on purpose: constant folding must not turn integer weights
into f32 ones in the artifact (the check against PyTorch is the reference).
* ``qconv(x, w, bias)``: convolution of quantized ``x`` by i8 weights ``w`` (per-tensor
  or per-output-channel scales ``w_scales``), i32 ``bias`` in units of
  ``x_scale * w_scale``, accumulated in i32 and requantized to ``y_scale``/``y_zero_point``;
  ``relu`` clamps the result at the zero point (a fused ReLU).
* ``qlinear(x, w, bias)``: the same for ``x @ w.T`` (``w`` is ``[out, in]``).
"""

from __future__ import annotations

from typing import Any

from t2n.ir.attributes import BOOL, DTYPE, FLOAT, FLOATS, INT, required
from t2n.ir.dtypes import DType
from t2n.ir.infer_utils import InferError
from t2n.ir.ops.nn import CONV_ATTRS, conv_out_dim
from t2n.ir.schema import InferContext, OpTable, Trait
from t2n.ir.types import QuantInfo, Shape, TensorType

TABLE = OpTable("quant")

_PURE = frozenset({Trait.PURE})
QUANTIZED_DTYPES = {DType.U8: (0, 255), DType.I8: (-128, 127)}


def quant_info(scale: float, zero_point: int, dtype: DType) -> QuantInfo:
    return QuantInfo((float(scale),), (int(zero_point),), 8, dtype is DType.I8)


def _out_dtype(ctx: InferContext) -> DType:
    dtype = ctx.attrs["dtype"]
    if dtype not in QUANTIZED_DTYPES:
        raise InferError(f"quantized ops produce u8 or i8, not {dtype}")
    return DType(dtype)


QUANTIZE_ATTRS = {"scale": required(FLOAT), "zero_point": required(INT)}
QUANTIZED_ATTRS = {
    "x_scale": required(FLOAT), "x_zero_point": required(INT), "w_scales": required(FLOATS),
    "w_zero_point": required(INT), "y_scale": required(FLOAT), "y_zero_point": required(INT),
    "dtype": required(DTYPE), "relu": required(BOOL),
}
"""The quantization parameters of ``qconv`` and ``qlinear``."""


@TABLE.op("quantize", traits=_PURE, attrs={**QUANTIZE_ATTRS, "dtype": required(DTYPE)})
def _quantize(ctx: InferContext) -> list[TensorType]:
    """f32 → u8/i8 (attrs scale, zero_point, dtype)."""
    x = ctx.types[0]
    if not x.dtype.is_float:
        raise InferError(f"quantize: input must be floating point, got {x.dtype}")
    dtype = _out_dtype(ctx)
    return [TensorType(dtype, x.shape, quant_info(ctx.attrs["scale"], ctx.attrs["zero_point"], dtype))]


@TABLE.op("dequantize", traits=_PURE, attrs=QUANTIZE_ATTRS)
def _dequantize(ctx: InferContext) -> list[TensorType]:
    """u8/i8 → f32 (attrs scale, zero_point)."""
    q = ctx.types[0]
    if q.dtype not in QUANTIZED_DTYPES:
        raise InferError(f"dequantize: input must be u8 or i8, got {q.dtype}")
    return [TensorType(DType.F32, q.shape)]


def _check_quantized_operands(ctx: InferContext, kind: str) -> None:
    x, w, b = ctx.types
    if x.dtype not in QUANTIZED_DTYPES:
        raise InferError(f"{kind}: input must be u8 or i8, got {x.dtype}")
    if w.dtype is not DType.I8:
        raise InferError(f"{kind}: weights must be i8, got {w.dtype}")
    if b.dtype is not DType.I32 or b.rank != 1 or b.shape[0] != w.shape[0]:
        raise InferError(f"{kind}: bias must be i32 with one entry per output channel")
    if len(ctx.attrs["w_scales"]) not in (1, w.shape[0]):
        raise InferError(f"{kind}: w_scales must have 1 or {w.shape[0]} entries")


@TABLE.op("qconv", traits=_PURE, attrs={**CONV_ATTRS, **QUANTIZED_ATTRS})
def _qconv(ctx: InferContext) -> list[TensorType]:
    """qconv(x, w, bias): attrs stride, dilation, padding, groups, x_scale, x_zero_point,
    w_scales, w_zero_point, y_scale, y_zero_point, dtype, relu."""
    _check_quantized_operands(ctx, "qconv")
    x, w = ctx.types[0], ctx.types[1]
    st, dl, pad = ctx.attrs["stride"], ctx.attrs["dilation"], ctx.attrs["padding"]
    spatial = x.rank - 2
    if not (len(st) == len(dl) == len(pad) == spatial == w.rank - 2):
        raise InferError("qconv: stride/dilation/padding must have one entry per spatial axis")
    out: list[Any] = [x.shape[0], w.shape[0]]
    for i in range(spatial):
        k = w.shape[2 + i]
        if not isinstance(k, int):
            raise InferError("qconv: kernel sizes must be static")
        out.append(conv_out_dim(x.shape[2 + i], k, st[i], dl[i], *pad[i]))
    dtype = _out_dtype(ctx)
    return [TensorType(dtype, Shape(out), quant_info(ctx.attrs["y_scale"], ctx.attrs["y_zero_point"], dtype))]


@TABLE.op("qlinear", traits=_PURE, attrs=QUANTIZED_ATTRS)
def _qlinear(ctx: InferContext) -> list[TensorType]:
    """qlinear(x, w, bias) = x @ w.T + bias, requantized; attrs as ``qconv`` (no geometry)."""
    _check_quantized_operands(ctx, "qlinear")
    x, w = ctx.types[0], ctx.types[1]
    if w.rank != 2 or x.rank < 1 or x.shape[-1] != w.shape[1]:
        raise InferError(f"qlinear: input {x.shape} does not match weights {w.shape}")
    dtype = _out_dtype(ctx)
    shape = Shape([*x.shape[:-1], w.shape[0]])
    return [TensorType(dtype, shape, quant_info(ctx.attrs["y_scale"], ctx.attrs["y_zero_point"], dtype))]
