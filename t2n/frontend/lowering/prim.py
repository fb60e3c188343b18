"""Structural TorchScript nodes: constants, lists and tuples, attributes (parameters),
sizes and Python-number conversions, and ops that are identities at inference."""

from __future__ import annotations

from typing import Any

import torch

from t2n.frontend.context import LoweringContext, ModuleRef, array_data
from t2n.frontend.dtypes import to_ir
from t2n.frontend.helpers import dim_value
from t2n.frontend.registry import RuleSet
from t2n.ir import DType, Value

RULES = RuleSet("prim")


@RULES.rule("prim::Constant")
def constant(ctx: LoweringContext) -> Any:
    out = ctx.node.output()
    if not ctx.node.hasAttribute("value"):
        return None
    val = out.toIValue()
    if isinstance(val, torch.Tensor):
        name = ctx.lowering.traced.name_of_constant(val, out.debugName())
        if name is not None:
            # A parameter frozen into the graph: keep its name and its memory.
            return ctx.lowering.state(val, name)
        if val.is_complex():  # its (real, imaginary) pair (frontend/complex_tensors.py)
            from t2n.frontend.complex_tensors import Complex

            return Complex(ctx.b.op("const", name="c", data=array_data(torch.view_as_real(val.resolve_conj()).clone())))
        return ctx.b.op("const", name="c", data=array_data(val.clone()))
    if isinstance(val, torch.device):
        return str(val)
    return val


@RULES.rule("prim::ListConstruct", "prim::TupleConstruct")
def construct(ctx: LoweringContext) -> Any:
    items = [ctx.raw(i) for i in range(ctx.n_inputs)]
    return items if ctx.kind == "prim::ListConstruct" else tuple(items)


@RULES.rule("aten::list")
def list_copy(ctx: LoweringContext) -> Any:
    """``list(x.size())`` (torch.stft's own code): a copy of a list of sizes."""
    items = ctx.raw(0)
    if not isinstance(items, (list, tuple)):
        raise ctx.unsupported("list() of a value that is not a list")
    return list(items)


@RULES.rule("prim::ListUnpack", "prim::TupleUnpack")
def unpack(ctx: LoweringContext) -> Any:
    seq = ctx.raw(0)
    if isinstance(seq, Value):
        n = ctx.n_outputs
        items = tuple(
            ctx.b.op("squeeze", ctx.b.op("slice", seq, ctx.b.ints([i]), ctx.b.ints([i + 1]),
                                         axes=(0,), steps=(1,)), axes=(0,))
            for i in range(n)
        )
    elif len(seq) != ctx.n_outputs:
        raise ctx.unsupported(f"unpacking {len(seq)} items into {ctx.n_outputs}")
    else:
        items = tuple(seq)
    # one output holds the item itself, not a 1-tuple (a rule reading it as a list,
    # e.g. slicing, would take the tuple for a list of sizes)
    return items[0] if len(items) == 1 else items


@RULES.rule("prim::TupleIndex", "aten::__getitem__", "prim::ListIndex")
def getitem(ctx: LoweringContext) -> Any:
    seq = ctx.raw(0)
    if isinstance(seq, (list, tuple)):
        return seq[ctx.int(1)]
    raise ctx.unsupported("indexing a tensor list that is computed at run time")


@RULES.rule("aten::len")
def length(ctx: LoweringContext) -> Any:
    seq = ctx.raw(0)
    if isinstance(seq, (list, tuple)):
        return len(seq)
    return dim_value(ctx.b, ctx.tensor(0), 0)


@RULES.rule("prim::GetAttr")
def get_attr(ctx: LoweringContext) -> Any:
    base = ctx.raw(0)
    if not isinstance(base, ModuleRef):
        raise ctx.unsupported("attribute of a non-module value")
    name = ctx.node.s("name")
    written = ctx.lowering.module_writes.get((id(base.obj), name), _UNSET)
    if written is not _UNSET:
        return written
    obj = getattr(base.obj, name)
    path = f"{base.path}.{name}" if base.path else name
    if isinstance(obj, torch.Tensor):
        return ctx.lowering.parameter(obj, path)
    if isinstance(obj, torch.nn.Module):
        return ModuleRef(path, obj)
    return obj


_UNSET = object()


@RULES.rule("prim::SetAttr")
def set_attr(ctx: LoweringContext) -> Any:
    """A module attribute written in forward (e.g. a call counter): later reads in the same
    forward see the new value; the module itself is not changed."""
    base = ctx.raw(0)
    if not isinstance(base, ModuleRef):
        raise ctx.unsupported("attribute write on a non-module value")
    ctx.lowering.module_writes[(id(base.obj), ctx.node.s("name"))] = ctx.raw(1)
    return None


@RULES.rule("aten::size")
def size(ctx: LoweringContext) -> Any:
    x = ctx.tensor(0)
    static = ctx.lowering.static_sizes
    if ctx.n_inputs > 1 and not ctx.is_none(1):
        axis = ctx.axis(1, x.rank)
        d = x.type.shape[axis]
        return d if static and isinstance(d, int) else dim_value(ctx.b, x, axis)
    return [d if static and isinstance(d, int) else dim_value(ctx.b, x, i) for i, d in enumerate(x.type.shape)]


@RULES.rule("aten::dim")
def dim(ctx: LoweringContext) -> Any:
    return ctx.tensor(0).rank


@RULES.rule("aten::numel")
def numel(ctx: LoweringContext) -> Any:
    x = ctx.tensor(0)
    shape = ctx.b.op("shape_of", x)
    return ctx.b.op("prod_reduce", shape, axes=(0,), keepdims=False)


@RULES.rule("prim::NumToTensor", "aten::scalar_tensor")
def num_to_tensor(ctx: LoweringContext) -> Any:
    x = ctx.raw(0)
    if ctx.kind == "aten::scalar_tensor":
        # torch.scalar_tensor gives the default float dtype unless told otherwise.
        dt = ctx.dtype_arg("dtype") if ctx.has("dtype") else None
        return ctx.as_value(x, dt or ctx.traced_dtype() or DType.F32)
    if isinstance(x, Value):
        return x
    if ctx.lowering.static_sizes and type(x) is int and ctx.kind == "prim::NumToTensor":
        return x  # a size: the ops on it run in Python (see ``Lowering.static_sizes``)
    if isinstance(x, float) and ctx.kind == "prim::NumToTensor":
        return ctx.as_value(x, DType.F64)
    return ctx.as_value(x)


@RULES.rule("aten::Int", "aten::Float", "aten::Bool", "aten::ScalarImplicit", "prim::unchecked_cast",
            "aten::IntImplicit", "aten::FloatImplicit")
def python_number(ctx: LoweringContext) -> Any:
    x = ctx.raw(0)
    want = {"aten::Int": DType.I64, "aten::IntImplicit": DType.I64, "aten::Float": DType.F32,
            "aten::FloatImplicit": DType.F32, "aten::Bool": DType.BOOL}.get(ctx.kind)
    if isinstance(x, Value):
        # Stays a graph value (a size read with int(x.size(1)) must follow dynamic axes);
        # rules that need a constant ask for one and the frontend records it.
        if want is DType.I64 and x.type.dtype is not DType.I64:
            return ctx.b.cast(x, DType.I64)
        if want is DType.F32 and not x.type.dtype.is_float:
            return ctx.b.cast(x, DType.F32)
        if want is DType.BOOL and x.type.dtype is not DType.BOOL:
            return ctx.b.cast(x, DType.BOOL)
        return x
    if want is DType.I64:
        return int(x)
    if want is DType.F32:
        return float(x)
    return x


@RULES.rule("aten::detach", "aten::contiguous", "aten::clone", "aten::alias",
            "aten::lift_fresh", "aten::detach_", "aten::resolve_conj",
            "aten::resolve_neg", "prim::data", "aten::_assert_tensor_metadata", "aten::lift",
            "aten::lift_fresh_copy")
def identity(ctx: LoweringContext) -> Any:
    """Ops that only change memory layout or autograd state (dropout: ``lowering/sampling.py``)."""
    return ctx.raw(0)


@RULES.rule("prim::device", "prim::layout")
def device(ctx: LoweringContext) -> Any:
    return "cpu"


@RULES.rule("prim::dtype")
def dtype_of(ctx: LoweringContext) -> Any:
    from t2n.frontend.dtypes import to_torch

    return to_torch(ctx.tensor(0).type.dtype)


def _target_dtype(ctx: LoweringContext) -> DType | None:
    """The dtype an ``aten::to`` asks for, whichever overload it is."""
    if ctx.has("other"):
        return ctx.tensor("other").type.dtype
    if ctx.has("dtype") and not ctx.is_none("dtype"):
        return to_ir(ctx.const("dtype"))
    return None


@RULES.rule("aten::to", "aten::type_as", "aten::_to_copy")
def to(ctx: LoweringContext) -> Any:
    x = ctx.tensor(0)
    if ctx.kind == "aten::type_as":
        return ctx.b.cast(x, ctx.tensor(1).type.dtype)
    if ctx.has("dtype") and _complex_dtype(ctx.optional("dtype")):
        return _to_complex(ctx, x, ctx.optional("dtype"))
    dt = _target_dtype(ctx)
    return ctx.b.cast(x, dt) if dt is not None else x


def _complex_dtype(dtype: object) -> bool:
    return isinstance(dtype, torch.dtype) and dtype.is_complex


def _to_complex(ctx: LoweringContext, x: Value, dtype: torch.dtype) -> Any:
    """A real tensor made complex (as torch.export spells ``torch.fft`` of a real signal):
    the (real, imaginary) pair of :mod:`t2n.frontend.complex_tensors`, imaginary zero."""
    from t2n.frontend.complex_tensors import of_real

    part = DType.F64 if dtype == torch.complex128 else DType.F32
    return of_real(ctx.b, ctx.b.cast(x, part))


__all__ = ["array_data"]


@RULES.rule("aten::native_dropout")
def native_dropout(ctx: LoweringContext) -> tuple[Value, Value]:
    """Inference: the input unchanged and an all-true mask."""
    x = ctx.tensor(0)
    if ctx.n_inputs > 2 and ctx.raw(2) is True:
        raise ctx.unsupported("dropout in training mode (random)")
    mask = ctx.b.op("expand", ctx.as_value(True, DType.BOOL), ctx.b.op("shape_of", x))
    return x, mask
