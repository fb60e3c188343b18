"""Emitters for reductions: NNEF reductions keep the reduced axes, so drop them after."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.ir import Op

COMMON = EmitterTable("reduce")


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

