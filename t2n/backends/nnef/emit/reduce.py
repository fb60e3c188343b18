"""Emitters for reductions: NNEF reductions keep the reduced axes, so drop them after."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.backends.nnef.versions import tract_has
from t2n.ir import Op

COMMON = EmitterTable("reduce")
TRACT = EmitterTable("reduce/tract")

_NAMES = {
    "sum_reduce": "sum_reduce", "mean_reduce": "mean_reduce", "max_reduce": "max_reduce",
    "min_reduce": "min_reduce", "any_reduce": "any_reduce", "all_reduce": "all_reduce",
    "argmax_reduce": "argmax_reduce", "argmin_reduce": "argmin_reduce",
}


def reduce_as(name: str):  # type: ignore[no-untyped-def]
    def emit(ctx: EmitContext, op: Op) -> None:
        axes = list(op.attrs["axes"])
        if op.attrs.get("keepdims", False) or not axes:
            ctx.emit(op.output, name, op.inputs[0], axes=axes)
            return
        kept = ctx.emit(f"{op.output.name}_keep", name, op.inputs[0], axes=axes)
        ctx.emit(op.output, "squeeze", Raw(kept), axes=axes)

    return emit


for _k, _n in _NAMES.items():
    COMMON.add(_k, reduce_as(_n))
TRACT.add("prod_reduce", reduce_as("tract_core_product_reduce"))


def _logical_reduce(name: str, numeric: str, test: str):  # type: ignore[no-untyped-def]
    """``any_reduce``/``all_reduce``; before tract 0.23 (which lacks them) the max/min of
    the logical input cast to f32, compared with 0/1."""
    native = reduce_as(name)

    def emit(ctx: EmitContext, op: Op) -> None:
        if tract_has(ctx, name):
            native(ctx, op)
            return
        axes = list(op.attrs["axes"])
        as_f32 = ctx.call("tract_core_cast", op.inputs[0], to="f32")
        kept = ctx.emit(f"{op.output.name}_num", numeric, Raw(as_f32), axes=axes)
        keep = op.attrs.get("keepdims", False) or not axes
        out = op.output if keep else f"{op.output.name}_keep"
        tested = ctx.emit(out, test, Raw(kept), 0.0 if test == "gt" else 1.0)
        if not keep:
            ctx.emit(op.output, "squeeze", Raw(tested), axes=axes)

    return emit


TRACT.add("any_reduce", _logical_reduce("any_reduce", "max_reduce", "gt"))
TRACT.add("all_reduce", _logical_reduce("all_reduce", "min_reduce", "eq"))
