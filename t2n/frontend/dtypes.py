"""torch dtype <-> IR DType, and PyTorch's type promotion on IR operands.

8-bit floats (``torch.float8_*``) have no NNEF or tract type. Tensors stored in them
(parameters, buffers, constants) are exported as the type holding each of their values
exactly (f16; f32 for e8m0, see :mod:`t2n.ir.float8`), with a warning naming the
tensor. Moving them around (transpose, reshape, slicing, ...) and casting them to
another type is exact in that type too; computing in float8 (PyTorch rounds results
to float8) or casting to float8 is refused with the op and its source line.
"""

from __future__ import annotations

import torch

from t2n.frontend.unsupported import UnsupportedHere
from t2n.ir import DType
from t2n.torch_data import FLOAT8_DTYPES, IR_TO_TORCH, TORCH_TO_IR

# ScalarType codes used by TorchScript constants (c10::ScalarType order), by dtype name:
# every dtype of this PyTorch, so that a cast names the dtype it asks for.
_SCALAR_TYPE_NAMES = (
    "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "complex32",
    "complex64", "complex128", "bool", "qint8", "quint8", "qint32", "bfloat16", "quint4x2",
    "quint2x4", "bits1x8", "bits2x4", "bits4x2", "bits8", "bits16", "float8_e5m2",
    "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz", "uint16", "uint32", "uint64",
    "uint1", "uint2", "uint3", "uint4", "uint5", "uint6", "uint7", "int1", "int2", "int3",
    "int4", "int5", "int6", "int7", "float8_e8m0fnu", "float4_e2m1fn_x2",
)
SCALAR_TYPE_CODES: dict[int, torch.dtype] = {
    code: getattr(torch, name) for code, name in enumerate(_SCALAR_TYPE_NAMES) if hasattr(torch, name)
}


def to_ir(dtype: torch.dtype | int) -> DType:
    """The IR dtype of a PyTorch dtype (or TorchScript scalar type code); a dtype with
    no NNEF counterpart (complex, quantized, sub-byte, 8-bit floats) is refused, naming it."""
    if isinstance(dtype, int):
        if dtype not in SCALAR_TYPE_CODES:
            raise UnsupportedHere(f"scalar type code {dtype} is not a dtype of PyTorch {torch.__version__}")
        dtype = SCALAR_TYPE_CODES[dtype]
    if dtype in FLOAT8_DTYPES:
        raise UnsupportedHere(f"{_FLOAT8_COMPUTE.format(dtype=str(dtype).removeprefix('torch.'))}")
    try:
        return TORCH_TO_IR[dtype]
    except KeyError:
        raise UnsupportedHere(f"{dtype} has no NNEF counterpart ({_WHY_NOT.get(dtype, _WHY_DEFAULT)})") from None


_WHY_DEFAULT = ("NNEF and tract hold bool, 8/16/32/64-bit signed and unsigned integers and "
                "16/32/64-bit floats; compute in one of those")
_WHY_NOT: dict[torch.dtype, str] = {
    **{dt: "t2n exports real tensors only: keep complex values as a real and an imaginary "
           "part (torch.view_as_real)" for dt in (torch.complex32, torch.complex64, torch.complex128)},
    **{dt: "quantized tensors are exported from torch.ao.quantization modules, not by a cast"
       for dt in (torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4)},
}


_FLOAT8_COMPUTE = ("{dtype} values cannot be computed in NNEF or tract (they have no 8-bit "
                   "float); compute in f16/f32 (e.g. w.to(x.dtype) before using a float8 weight). "
                   "float8 parameters, buffers and constants themselves are exported as f16")


_MOVES_DATA = frozenset({
    "aten::t", "aten::transpose", "aten::permute", "aten::reshape", "aten::view", "aten::flatten",
    "aten::squeeze", "aten::unsqueeze", "aten::select", "aten::slice", "aten::index", "aten::narrow",
    "aten::contiguous", "aten::clone", "aten::detach", "aten::expand", "aten::expand_as",
    "aten::cat", "aten::stack", "aten::chunk", "aten::split", "aten::unbind", "aten::flip",
    "aten::repeat", "aten::movedim", "aten::unflatten", "aten::alias", "aten::numpy_T",
})
"""Ops that only move elements: exact on the f16 values a float8 tensor is exported as."""


def float8_problem(node: torch._C.Node) -> str | None:
    """Why ``node`` cannot be exported if it makes float8 values other than by moving
    them (PyTorch rounds every result to float8: an f16 graph would differ), else None."""
    kind = node.kind()
    if kind.startswith("prim::") or kind in _MOVES_DATA:
        return None
    # One output in almost every node: read it without building the list (a third of
    # the time, which counts on graphs of tens of thousands of nodes).
    outs = [node.output()] if node.outputsSize() == 1 else list(node.outputs())
    for out in outs:
        t = out.type()
        if isinstance(t, torch._C.TensorType):
            name = t.scalarType()
            if name is not None and name.startswith("Float8"):
                return _FLOAT8_COMPUTE.format(dtype=name)
    return None


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
