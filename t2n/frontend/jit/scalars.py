"""Python evaluation of TorchScript ops on scalars, strings, lists and tuples.

Scripted graphs compute loop counters, sizes and flags with ops such as
``aten::lt(int, int)``; when every input is a Python value these are evaluated here,
both by JIT hardening and by the lowering driver, instead of by tensor rules.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

SCALAR_OPS: dict[str, Callable[..., Any]] = {
    "aten::eq": operator.eq, "aten::ne": operator.ne, "aten::lt": operator.lt,
    "aten::gt": operator.gt, "aten::le": operator.le, "aten::ge": operator.ge,
    "aten::add": operator.add, "aten::sub": operator.sub, "aten::mul": operator.mul,
    "aten::div": operator.truediv, "aten::floordiv": operator.floordiv,
    "aten::remainder": operator.mod, "aten::neg": operator.neg, "aten::pow": operator.pow,
    "aten::__not__": operator.not_, "aten::__and__": operator.and_, "aten::__or__": operator.or_,
    "aten::__xor__": operator.xor, "aten::Int": int, "aten::Float": float, "aten::Bool": bool,
    "aten::ScalarImplicit": lambda x: x, "aten::IntImplicit": int, "aten::FloatImplicit": float,
    "aten::__is__": operator.is_, "aten::__isnot__": operator.is_not, "aten::len": len,
    "aten::__contains__": lambda seq, item: item in seq, "prim::min": min, "prim::max": max,
    "aten::floor": math.floor, "aten::ceil": math.ceil, "aten::abs": abs,
    "prim::unchecked_cast": lambda x: x, "aten::__getitem__": operator.getitem,
    "prim::TupleIndex": operator.getitem, "aten::str": str, "aten::list": list,
    "aten::floor_divide": lambda a, b: _ints_only(a, b) // b,
}
"""Ops on Python scalars, strings, lists and tuples that are folded when their inputs are constant."""

SCALAR_FOLD_ERRORS = (TypeError, ValueError, ArithmeticError, LookupError)
"""What a ``SCALAR_OPS`` function raises when its Python inputs do not suit it (a float
where an int is needed, a division by zero, an index out of range): the op is then
not folded and its tensor rule (or the error report) takes over."""


def _ints_only(a: Any, b: Any) -> int:
    """``a`` if both are ints (torch's floor division of integers is Python's ``//``);
    floats are left to the tensor rule."""
    if type(a) is not int or type(b) is not int:
        raise TypeError("floor_divide is folded in Python for ints only")
    return a


LIST_OPS = frozenset({"aten::add", "aten::mul", "aten::list", "aten::__getitem__", "aten::len"})
"""Ops of ``SCALAR_OPS`` that also apply to lists whose items are computed (sizes under
dynamic axes): ``[1] * k + list(x.size())`` joins lists, whatever they hold."""


def is_list_op(kind: str, args: Sequence[Any]) -> bool:
    """Whether ``kind`` on ``args`` is a list operation (its first argument a list, the
    others Python values or lists) that Python can do on the lowered items."""
    return kind in LIST_OPS and bool(args) and isinstance(args[0], (list, tuple)) and \
        all(is_python_value(a) or isinstance(a, (list, tuple)) for a in args[1:])


def is_python_value(x: Any) -> bool:
    if isinstance(x, (bool, int, float, str)) or x is None:
        return True
    if isinstance(x, (list, tuple)):
        return all(is_python_value(v) for v in x)
    return False
