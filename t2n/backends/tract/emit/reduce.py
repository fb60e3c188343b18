"""tract's emitters of the reduce family (the forms both targets share are in
:mod:`t2n.backends.nnef.emit.reduce`)."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.backends.nnef.emit.reduce import reduce_as
from t2n.backends.tract.versions import tract_has
from t2n.ir import Op

TRACT = EmitterTable("reduce/tract")


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

