"""torch dtype <-> IR DType, and PyTorch's type promotion on IR operands."""

from __future__ import annotations

import torch

from t2n.errors import InvalidArgumentError
from t2n.ir import DType

TORCH_TO_IR: dict[torch.dtype, DType] = {
    torch.bool: DType.BOOL, torch.uint8: DType.U8, torch.int8: DType.I8,
    torch.int16: DType.I16, torch.int32: DType.I32, torch.int64: DType.I64,
    torch.float16: DType.F16, torch.bfloat16: DType.BF16, torch.float32: DType.F32,
    torch.float64: DType.F64, torch.uint16: DType.U16, torch.uint32: DType.U32,
    torch.uint64: DType.U64,
}
IR_TO_TORCH = {v: k for k, v in TORCH_TO_IR.items()}

# ScalarType codes used by TorchScript constants (c10::ScalarType order).
SCALAR_TYPE_CODES: dict[int, torch.dtype] = {
    0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64,
    5: torch.float16, 6: torch.float32, 7: torch.float64, 11: torch.bool, 15: torch.bfloat16,
}


def to_ir(dtype: torch.dtype | int) -> DType:
    if isinstance(dtype, int):
        if dtype not in SCALAR_TYPE_CODES:
            raise InvalidArgumentError(f"unsupported scalar type code {dtype}")
        dtype = SCALAR_TYPE_CODES[dtype]
    try:
        return TORCH_TO_IR[dtype]
    except KeyError:
        raise InvalidArgumentError(f"dtype {dtype} has no NNEF equivalent") from None


def to_torch(dtype: DType) -> torch.dtype:
    return IR_TO_TORCH[dtype]


Operand = object  # an IR Value (dtype + rank) or a Python scalar


def promote(*items: tuple[DType, int] | bool | int | float) -> DType:
    """PyTorch's result dtype for operands given as (dtype, rank) pairs or Python scalars.

    Uses ``torch.result_type`` on stand-ins of the same dtype and rank, so the rules
    (categories, zero-dim tensors, weak Python scalars) are PyTorch's own.
    """
    stand_ins: list[torch.Tensor | bool | int | float] = []
    for it in items:
        if isinstance(it, tuple):
            dt, rank = it
            stand_ins.append(torch.empty((1,) * min(rank, 1) if rank else (), dtype=to_torch(dt)))
        else:
            stand_ins.append(it)
    if not stand_ins:
        raise ValueError("promote() needs operands")
    result = stand_ins[0]
    if len(stand_ins) == 1:
        return to_ir(result.dtype) if isinstance(result, torch.Tensor) else _scalar_dtype(result)
    dtype = torch.result_type(stand_ins[0], stand_ins[1])
    for extra in stand_ins[2:]:
        dtype = torch.promote_types(dtype, torch.result_type(torch.empty((), dtype=dtype), extra)
                                    if not isinstance(extra, torch.Tensor) else extra.dtype)
    return to_ir(dtype)


def _scalar_dtype(x: object) -> DType:
    if isinstance(x, bool):
        return DType.BOOL
    if isinstance(x, int):
        return DType.I64
    return DType.F32
