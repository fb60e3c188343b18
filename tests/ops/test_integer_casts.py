"""Casts to every integer type PyTorch has, checked in tract and the Khronos interpreter.

PyTorch's CPU casts wrap: a float is truncated toward zero then wrapped into the target
type (``300.5`` → 44 as int8, ``-3.5`` → 253 as uint8), and a wider integer keeps its
low bits. tract saturates a float cast, so t2n casts floats to 8/16-bit and unsigned
types through i64. Khronos NNEF has one integer type without a width: t2n wraps into
8/16-bit types in real arithmetic, and refuses a possibly negative value cast to a
32/64-bit unsigned type. A dtype with no NNEF counterpart (complex, quantized) is a
refusal naming it, never a lowering crash.
"""

import pytest
import torch

import t2n
from t2n.errors import NotExpressibleError, UnsupportedOpsError
from t2n.frontend.context import UnsupportedHere
from t2n.frontend.dtypes import SCALAR_TYPE_CODES, to_ir
from t2n.testing import Lambda, check_export

INTEGER_TYPES = [torch.uint8, torch.int8, torch.int16, torch.uint16, torch.uint32, torch.uint64]
"""The integer types a value may not fit in (int32 and int64 casts are tested with the
other element-wise ops)."""
WIDE_UNSIGNED = (torch.uint32, torch.uint64)

# floats beyond the 8/16-bit ranges on both sides, with fractions (truncation toward zero)
FLOATS = torch.tensor([[-70000.5, -300.7, -129.5, -3.5, -0.5, 0.0],
                       [0.9, 127.6, 255.5, 300.5, 40000.25, 70000.75]])
INTS = torch.tensor([[-70000, -65537, -32769, -300, -129, -1],
                     [0, 127, 128, 255, 32768, 70000]])


def _targets(dtype, source_signed):
    """Khronos refuses a signed source cast to a 32/64-bit unsigned type."""
    return ("tract",) if dtype in WIDE_UNSIGNED and source_signed else ("tract", "khronos")


@pytest.mark.parametrize("dtype", INTEGER_TYPES, ids=str)
def test_float_cast_to_every_integer_type_wraps_as_pytorch(dtype):
    check_export(Lambda(lambda x: x.to(dtype)), (FLOATS,), targets=_targets(dtype, True))


@pytest.mark.parametrize("dtype", INTEGER_TYPES, ids=str)
def test_integer_cast_to_every_integer_type_keeps_the_low_bits(dtype):
    check_export(Lambda(lambda x: x.to(dtype)), (INTS,), targets=_targets(dtype, True))


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64], ids=str)
def test_unsigned_values_cast_back_to_float(dtype):
    """Non-negative integers through the new unsigned types and back (both engines: an
    unsigned source never needs a wrap)."""
    x = torch.tensor([[0, 1, 255, 256], [4095, 65535, 12, 7]])
    check_export(Lambda(lambda v: v.to(dtype).to(torch.uint64).float() * 0.5), (x,), targets=("tract",))
    check_export(Lambda(lambda v: v.to(torch.uint8).to(dtype).to(torch.int64)), (x,))


@pytest.mark.parametrize("dtype", WIDE_UNSIGNED, ids=str)
def test_khronos_refuses_a_signed_value_cast_to_a_wide_unsigned_type(dtype):
    with pytest.raises(NotExpressibleError, match=f"to {to_ir(dtype)}: PyTorch wraps negative values"):
        t2n.compile(Lambda(lambda x: x.to(dtype)), (INTS,), t2n.KhronosNNEF())


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64], ids=str)
def test_the_scalar_type_code_a_trace_records_names_its_dtype(dtype):
    graph = torch.jit.trace(Lambda(lambda x: x.to(dtype)), torch.zeros(2)).graph
    codes = [n.i("value") for n in graph.nodes() if n.kind() == "prim::Constant" and str(n.output().type()) == "int"]
    assert [SCALAR_TYPE_CODES.get(c) for c in codes] == [dtype]


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128, torch.qint8, torch.int4, torch.uint3],
                         ids=str)
def test_dtypes_without_an_nnef_counterpart_are_refused_by_name(dtype):
    with pytest.raises(UnsupportedHere, match=f"{dtype} has no NNEF counterpart"):
        to_ir(dtype)


def test_a_complex_cast_in_a_model_is_reported_with_the_dtype():
    with pytest.raises(UnsupportedOpsError, match=r"aten::to .*torch.complex64 has no NNEF counterpart"):
        t2n.compile(Lambda(lambda x: x.to(torch.complex64).abs()), (FLOATS,))


def test_an_unknown_scalar_type_code_is_a_refusal_not_a_crash():
    with pytest.raises(UnsupportedHere, match="scalar type code 99 is not a dtype"):
        to_ir(99)
