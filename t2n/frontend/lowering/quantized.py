"""Models quantized with ``torch.ao.quantization`` (eager and FX, post-training static).

Activations are per-tensor affine u8/i8 (``quint8``/``qint8``), weights i8 per tensor
or per output channel, read from the packed parameters (``unpack()``) the trace holds.
Convolutions and linears become the integer ``qconv``/``qlinear`` IR ops (i32
accumulation, requantized once, as PyTorch's kernels do); element-wise ops on quantized
tensors (``add``, ``mul``, ``cat``, ``relu``, ``sigmoid``, ``hardswish``…) dequantize,
compute in f32 and quantize to the output's parameters, which is PyTorch's definition
of them. ``quantized::<op>`` names also stand for an ``aten::<op>`` that ran on a
quantized tensor (see ``frontend/jit/quantized_trace.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from t2n.frontend.context import LoweringContext
from t2n.frontend.registry import RuleSet
from t2n.ir import DType, Value
from t2n.ir.tensor_data import ArrayData
from t2n.ir.types import QuantInfo

RULES = RuleSet("quantized")

_QUANTIZED_CODES = {12: "qint8", 13: "quint8", 14: "qint32", 16: "quint4x2", 17: "quint2x4"}
_ACTIVATION_DTYPES = {"quint8": DType.U8, "qint8": DType.I8, "QUInt8": DType.U8, "QInt8": DType.I8}
_LAYOUT_KINDS = frozenset({"reshape", "transpose", "squeeze", "unsqueeze", "slice", "identity",
                           "expand", "tile", "gather"})
_SUPPORTED_SCHEMES = "per-tensor affine quint8/qint8 activations"


def quant_of(v: Value) -> QuantInfo | None:
    """The quantization of ``v``: its type's, or that of the quantized tensor whose
    integers it moves around (through layout ops, which keep the parameters)."""
    seen = 0
    while v.type.quant is None and v.producer is not None and seen < 64:
        op = v.producer
        if op.kind not in _LAYOUT_KINDS or not op.inputs:
            return None
        v = op.inputs[0]
        seen += 1
    return v.type.quant


def _input_quant(ctx: LoweringContext, key: int) -> tuple[Value, QuantInfo]:
    x = ctx.tensor(key)
    q = quant_of(x)
    if q is None:
        raise ctx.unsupported(f"argument {key} is not a tensor quantized in the model "
                              f"(t2n follows {_SUPPORTED_SCHEMES} from quantize_per_tensor)")
    if q.axis is not None or len(q.scale) != 1:
        raise ctx.unsupported("per-channel quantized activations are not supported; "
                              f"t2n supports {_SUPPORTED_SCHEMES}")
    return x, q


def _output_dtype(ctx: LoweringContext) -> DType:
    """The result's integer type: the traced one, else (a graph without dtypes, such as a
    scripted model's) the first input's, which PyTorch's quantized ops keep."""
    t = ctx.node.outputsAt(0).type()
    name = str(t.scalarType()) if isinstance(t, torch._C.TensorType) and t.scalarType() else ""
    first = ctx.raw(0)
    first = first[0] if isinstance(first, (list, tuple)) and first else first
    if not name and isinstance(first, Value) and first.type.dtype in (DType.U8, DType.I8):
        return first.type.dtype
    if name not in _ACTIVATION_DTYPES:
        raise ctx.unsupported(f"the result is {name or 'untyped'}; t2n supports {_SUPPORTED_SCHEMES}")
    return _ACTIVATION_DTYPES[name]


def dequantized(ctx: LoweringContext, x: Value, q: QuantInfo) -> Value:
    return ctx.b.op("dequantize", x, scale=q.scale[0], zero_point=q.zero_point[0])


def quantized(ctx: LoweringContext, x: Value, scale: float, zero_point: int, dtype: DType) -> Value:
    if not scale > 0 or not np.isfinite(scale):
        raise ctx.unsupported(f"the output scale {scale} must be a positive finite number")
    lo, hi = (0, 255) if dtype is DType.U8 else (-128, 127)
    if not lo <= zero_point <= hi:
        raise ctx.unsupported(f"the zero point {zero_point} is outside the range of {dtype.value}")
    return ctx.b.op("quantize", x, scale=float(scale), zero_point=int(zero_point), dtype=dtype)


# -- quantize / dequantize -----------------------------------------------------------

def _number(ctx: LoweringContext, key: int) -> float:
    """A scale or zero point: a constant, or a buffer of the model (FX keeps them so)."""
    raw = ctx.raw(key)
    if isinstance(raw, Value) and raw.producer is not None and raw.producer.kind == "variable":
        data = np.asarray(raw.producer.attrs["data"].values())
        if data.size == 1:
            return float(data.reshape(()))
    return ctx.float(key)


@RULES.rule("aten::quantize_per_tensor", "aten::quantize_per_tensor.tensor_qparams")
def quantize_per_tensor(ctx: LoweringContext) -> Value:
    code = ctx.int(3)
    name = _QUANTIZED_CODES.get(code, f"scalar type {code}")
    if name not in _ACTIVATION_DTYPES:
        raise ctx.unsupported(f"quantization to {name} is not supported; t2n supports {_SUPPORTED_SCHEMES}")
    x = ctx.tensor(0)
    if not x.type.dtype.is_float:
        raise ctx.unsupported(f"the input is {x.type.dtype.value}, not floating point")
    if x.type.dtype is not DType.F32:
        x = ctx.b.cast(x, DType.F32)
    return quantized(ctx, x, _number(ctx, 1), int(_number(ctx, 2)), _ACTIVATION_DTYPES[name])


@RULES.rule("aten::quantize_per_channel")
def quantize_per_channel(ctx: LoweringContext) -> Value:
    raise ctx.unsupported("per-channel quantized activations are not supported; "
                          f"t2n supports {_SUPPORTED_SCHEMES} (per-channel weights are supported)")


@RULES.rule("aten::dequantize.self", "aten::dequantize")
def dequantize(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    if x.type.dtype.is_float:
        return x
    x, q = _input_quant(ctx, 0)
    return dequantized(ctx, x, q)


# -- packed weights ------------------------------------------------------------------

def weight_scales(ctx: LoweringContext, w: torch.Tensor) -> tuple[tuple[float, ...], int]:
    """Per-tensor or per-output-channel scales of an i8 weight, and its zero point."""
    if w.dtype != torch.qint8:
        raise ctx.unsupported(f"weights quantized as {str(w.dtype).removeprefix('torch.')} are not "
                              "supported; t2n supports qint8 weights (per tensor or per channel)")
    scheme = w.qscheme()
    if scheme in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        return (float(w.q_scale()),), int(w.q_zero_point())
    if scheme in (torch.per_channel_affine, torch.per_channel_symmetric) and w.q_per_channel_axis() == 0:
        zps = {int(z) for z in w.q_per_channel_zero_points().tolist()}
        if len(zps) != 1:
            raise ctx.unsupported("per-channel weight zero points that differ between channels "
                                  "are not supported (use a symmetric per-channel qconfig)")
        return tuple(float(s) for s in w.q_per_channel_scales().tolist()), zps.pop()
    raise ctx.unsupported(f"weight quantization scheme {scheme} is not supported")


def packed_params(ctx: LoweringContext, key: int) -> Any:
    p = ctx.raw(key)
    if not isinstance(p, torch.ScriptObject):
        raise ctx.unsupported("the packed weights are not a constant of the model")
    return p


def _weights(ctx: LoweringContext, w: torch.Tensor, b: torch.Tensor | None, x_scale: float,
             shape: tuple[int, ...]) -> tuple[Value, Value, tuple[float, ...], int]:
    """The i8 weight and i32 bias (in units of ``x_scale * w_scale``) as variables."""
    scales, zp = weight_scales(ctx, w)
    where = ctx.loc.module or "model"
    w_int = w.int_repr().reshape(shape)
    wv = ctx.lowering.parameter(w_int, f"model.{where}.weight")
    n_out = w.shape[0]
    per_channel = np.asarray(scales if len(scales) == n_out else scales * n_out, dtype=np.float64)
    if b is None:
        b_int = np.zeros(n_out, dtype=np.int32)
    else:
        b_int = np.rint(b.detach().double().numpy() / (x_scale * per_channel))
        b_int = np.clip(b_int, -(2**31), 2**31 - 1).astype(np.int32)
    bv = ctx.b.variable(ArrayData(b_int), f"{where}.bias_q")
    return wv, bv, scales, zp


def _quant_attrs(q: QuantInfo, scales: tuple[float, ...], w_zp: int, y_scale: float,
                 y_zp: int, dtype: DType, relu: bool) -> dict[str, Any]:
    return dict(x_scale=q.scale[0], x_zero_point=q.zero_point[0], w_scales=scales,
                w_zero_point=w_zp, y_scale=float(y_scale), y_zero_point=int(y_zp), dtype=dtype,
                relu=relu)


@RULES.rule("quantized::conv1d", "quantized::conv2d", "quantized::conv2d.new",
            "quantized::conv1d_relu", "quantized::conv2d_relu", "quantized::conv2d_relu.new")
def qconv(ctx: LoweringContext) -> Value:
    x, q = _input_quant(ctx, 0)
    p = packed_params(ctx, 1)
    if ctx.n_inputs != 4:
        raise ctx.unsupported("the legacy form with explicit stride/padding is not supported")
    if bool(p.transpose()):
        raise ctx.unsupported("quantized transposed convolutions are not supported")
    w, b = p.unpack()
    spatial = x.type.rank - 2
    shape = tuple(w.shape[:2]) + tuple(w.shape[2:])[-spatial:] if spatial >= 1 else tuple(w.shape)
    if int(np.prod(shape)) != w.numel():
        raise ctx.unsupported(f"weights of shape {tuple(w.shape)} do not fit a {spatial}-d convolution")
    wv, bv, scales, w_zp = _weights(ctx, w, b, q.scale[0], shape)

    def per_axis(vals: list[int]) -> list[int]:
        return [int(v) for v in vals][-spatial:]

    dtype = _output_dtype(ctx)
    pads = per_axis(list(p.padding()))
    return ctx.b.op(
        "qconv", x, wv, bv, stride=per_axis(list(p.stride())), dilation=per_axis(list(p.dilation())),
        padding=[(pp, pp) for pp in pads], groups=int(p.groups()),
        **_quant_attrs(q, scales, w_zp, _number(ctx, 2), int(_number(ctx, 3)), dtype, ctx.kind.endswith("_relu")),
    )


@RULES.rule("quantized::linear", "quantized::linear_relu")
def qlinear(ctx: LoweringContext) -> Value:
    x, q = _input_quant(ctx, 0)
    w, b = torch.ops.quantized.linear_unpack(packed_params(ctx, 1))
    wv, bv, scales, w_zp = _weights(ctx, w, b, q.scale[0], tuple(w.shape))
    return ctx.b.op("qlinear", x, wv, bv, **_quant_attrs(
        q, scales, w_zp, _number(ctx, 2), int(_number(ctx, 3)), _output_dtype(ctx),
        ctx.kind.endswith("_relu")))


@RULES.rule("quantized::linear_dynamic_fp16", "quantized::linear_relu_dynamic_fp16")
def linear_dynamic_fp16(ctx: LoweringContext) -> Value:
    raise ctx.unsupported("float16 dynamic quantization is not supported (tract has no "
                          "f16-packed linear); quantize with torch.qint8 or export the float model")


# -- element-wise ops: f32 between dequantize and quantize ---------------------------

def _binary(ctx: LoweringContext, kind: str, relu: bool) -> Value:
    a, qa = _input_quant(ctx, 0)
    b, qb = _input_quant(ctx, 1)
    y = ctx.b.op(kind, dequantized(ctx, a, qa), dequantized(ctx, b, qb))
    if relu:
        y = ctx.b.op("relu", y)
    return quantized(ctx, y, _number(ctx, 2), int(_number(ctx, 3)), _output_dtype(ctx))


@RULES.rule("quantized::add")
def qadd(ctx: LoweringContext) -> Value:
    return _binary(ctx, "add", relu=False)


@RULES.rule("quantized::add_relu")
def qadd_relu(ctx: LoweringContext) -> Value:
    return _binary(ctx, "add", relu=True)


@RULES.rule("quantized::mul")
def qmul(ctx: LoweringContext) -> Value:
    return _binary(ctx, "mul", relu=False)


@RULES.rule("quantized::mul_relu")
def qmul_relu(ctx: LoweringContext) -> Value:
    return _binary(ctx, "mul", relu=True)


@RULES.rule("quantized::cat")
def qcat(ctx: LoweringContext) -> Value:
    items = ctx.raw(0)
    if not isinstance(items, (list, tuple)) or not items:
        raise ctx.unsupported("the tensors to join must be a list known at export time")
    parts, quants = [], []
    for item in items:
        q = quant_of(item) if isinstance(item, Value) else None
        if q is None or len(q.scale) != 1:
            raise ctx.unsupported(f"every joined tensor must be quantized with {_SUPPORTED_SCHEMES}")
        parts.append(dequantized(ctx, item, q))
        quants.append(q)
    axis = ctx.int(1) % parts[0].type.rank
    y = ctx.b.op("concat", *parts, axis=axis)
    if ctx.n_inputs < 4 or ctx.is_none(2) or ctx.is_none(3):  # torch.cat: the first input's
        return quantized(ctx, y, quants[0].scale[0], quants[0].zero_point[0], _output_dtype(ctx))
    return quantized(ctx, y, _number(ctx, 2), int(_number(ctx, 3)), _output_dtype(ctx))


def _unary(ctx: LoweringContext, fn: Any, fixed: tuple[float, int, int] | None = None) -> Value:
    """``fn`` on the dequantized input, quantized to the explicit output parameters
    (arguments 1, 2), else ``fixed`` (scale, zero point for u8, for i8), else the input's."""
    x, q = _input_quant(ctx, 0)
    dtype = _output_dtype(ctx)
    y = fn(dequantized(ctx, x, q))
    if ctx.n_inputs >= 3 and not ctx.is_none(1):
        return quantized(ctx, y, _number(ctx, 1), int(_number(ctx, 2)), dtype)
    if fixed is not None:
        return quantized(ctx, y, fixed[0], fixed[1] if dtype is DType.U8 else fixed[2], dtype)
    return quantized(ctx, y, q.scale[0], q.zero_point[0], dtype)


@RULES.rule("quantized::relu")
def qrelu(ctx: LoweringContext) -> Value:
    return _unary(ctx, lambda v: ctx.b.op("relu", v))


@RULES.rule("quantized::sigmoid")
def qsigmoid(ctx: LoweringContext) -> Value:
    """Without explicit parameters PyTorch fixes them: scale 1/256, zero point 0 (u8) or -128 (i8)."""
    return _unary(ctx, lambda v: ctx.b.op("sigmoid", v), fixed=(1.0 / 256.0, 0, -128))


@RULES.rule("quantized::hardswish")
def qhardswish(ctx: LoweringContext) -> Value:
    return _unary(ctx, lambda v: ctx.b.op("hard_swish", v))


def _clamped(ctx: LoweringContext, v: Value, lo: float, hi: float) -> Value:
    lo_v = ctx.b.const(np.float32(lo), DType.F32)
    hi_v = ctx.b.const(np.float32(hi), DType.F32)
    return ctx.b.op("min", ctx.b.op("max", v, lo_v), hi_v)


@RULES.rule("quantized::relu6")
def qrelu6(ctx: LoweringContext) -> Value:
    return _unary(ctx, lambda v: _clamped(ctx, v, 0.0, 6.0))


@RULES.rule("quantized::hardtanh")
def qhardtanh(ctx: LoweringContext) -> Value:
    lo, hi = ctx.float(1), ctx.float(2)
    x, q = _input_quant(ctx, 0)
    dtype = _output_dtype(ctx)
    y = _clamped(ctx, dequantized(ctx, x, q), lo, hi)
    return quantized(ctx, y, q.scale[0], q.zero_point[0], dtype)


__all__ = ["RULES", "dequantized", "packed_params", "quant_of", "quantized", "weight_scales"]
