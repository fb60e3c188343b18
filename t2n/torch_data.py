"""torch tensors and dtypes as the IR's data: the one table from torch dtypes to
:class:`~t2n.ir.DType`, and a tensor's memory seen as :class:`~t2n.ir.TensorData`.

The IR never imports torch; this module is the edge every torch-side part of t2n (the
frontend, the tensor writers, ``t2n.quantize``) goes through.

8-bit floats (``torch.float8_*``) have no NNEF or tract type: tensors stored in them
are exported as the type holding each of their values exactly (f16; f32 for e8m0, see
:mod:`t2n.ir.float8`), with a warning naming the tensor.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from t2n.errors import InvalidArgumentError
from t2n.ir import ArrayData, DType, TensorData
from t2n.ir.float8 import FLOAT8_FORMATS, Float8Format, decode_float8

log = logging.getLogger("t2n")

TORCH_TO_IR: dict[torch.dtype, DType] = {
    torch.bool: DType.BOOL, torch.uint8: DType.U8, torch.int8: DType.I8, torch.int16: DType.I16,
    torch.int32: DType.I32, torch.int64: DType.I64, torch.float16: DType.F16,
    torch.bfloat16: DType.BF16, torch.float32: DType.F32, torch.float64: DType.F64,
}
for _name, _dt in (("uint16", DType.U16), ("uint32", DType.U32), ("uint64", DType.U64)):
    if hasattr(torch, _name):
        TORCH_TO_IR[getattr(torch, _name)] = _dt
IR_TO_TORCH = {v: k for k, v in TORCH_TO_IR.items()}

FLOAT8_DTYPES: dict[torch.dtype, Float8Format] = {
    getattr(torch, name): fmt for name, fmt in FLOAT8_FORMATS.items() if hasattr(torch, name)
}
"""The 8-bit float dtypes of this PyTorch, and their bit layouts."""


def ir_dtype(dtype: torch.dtype) -> DType:
    try:
        return TORCH_TO_IR[dtype]
    except KeyError:
        raise InvalidArgumentError(f"torch dtype {dtype} has no NNEF form") from None


def tensor_data(t: torch.Tensor | np.ndarray | TensorData) -> TensorData:
    """IR tensor data for a tensor: a zero-copy view of a CPU tensor's memory (bf16 as
    its raw bits); other devices are copied to the CPU."""
    if isinstance(t, TensorData):
        return t
    if isinstance(t, np.ndarray):
        return ArrayData(t)
    if not isinstance(t, torch.Tensor):
        raise InvalidArgumentError(f"expected a torch.Tensor, got {type(t).__name__}")
    t = t.detach()
    if t.is_meta:
        raise InvalidArgumentError("a tensor on the meta device has no data to write")
    if t.layout != torch.strided:
        raise InvalidArgumentError(f"only dense tensors can be written, not {t.layout}")
    if t.device.type != "cpu":
        t = t.cpu()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    dtype = ir_dtype(t.dtype)
    if dtype is DType.BF16:
        return ArrayData(t.view(torch.int16).numpy().view(np.uint16), DType.BF16)
    return ArrayData(t.numpy(), dtype)


def float8_data(t: torch.Tensor, name: str = "") -> ArrayData | None:
    """A CPU float8 tensor as the exact values it is exported as (a new array), with a
    warning naming it; None for any other dtype."""
    fmt = FLOAT8_DTYPES.get(t.dtype)
    if fmt is None:
        return None
    codes = t.detach().cpu().contiguous().view(torch.uint8).numpy()
    log.warning("%s %s of shape %s: NNEF and tract have no 8-bit floats, so it is exported as "
                "%s, which holds each of its values exactly", f"tensor {name!r}" if name else "a tensor",
                fmt.name, list(t.shape), fmt.exported_as)
    return ArrayData(np.ascontiguousarray(decode_float8(codes, fmt)), fmt.exported_as)


def exported_dtype(dtype: torch.dtype) -> DType:
    """What a tensor of ``dtype`` is written as (float8 as the type holding it exactly)."""
    fmt = FLOAT8_DTYPES.get(dtype)
    return fmt.exported_as if fmt is not None else ir_dtype(dtype)


__all__ = ["FLOAT8_DTYPES", "IR_TO_TORCH", "TORCH_TO_IR", "exported_dtype", "float8_data", "ir_dtype",
           "tensor_data"]
