"""Emitters for max pooling with indices and for the scatter of ``max_unpool``.

tract's ``max_pool_with_index`` gives PyTorch's index as is (the flat position in the
unpadded input plane, first maximum on ties; i64), except where a window holds only
``-inf`` or a NaN (tract skips them: index 0, where PyTorch gives the window's first
cell or the NaN's). Standard NNEF's
``max_pool_with_index`` / ``argmax_pool`` do not say which index they give, and the
Khronos interpreter counts in the padded plane: a Khronos export whose indices are read
is refused, naming the op; one that drops them writes a plain ``max_pool``.
"""

from __future__ import annotations

from typing import Any

from t2n.backends.nnef.context import EmitContext, Raw
from t2n.ir import Op, Value


def index_is_read(ctx: EmitContext, op: Op) -> bool:
    index = op.outputs[1]
    return bool(index.uses) or ctx.graph.is_output(index)


def _pool_attrs(op: Op, lead: int) -> dict[str, Any]:
    return dict(size=[1] * lead + list(op.attrs["kernel"]), border="ignore",
                padding=[(0, 0)] * lead + [(int(p[0]), int(p[1])) for p in op.attrs["padding"]],
                stride=[1] * lead + list(op.attrs["stride"]),
                dilation=[1] * lead + list(op.attrs["dilation"]))


def emit_pool(ctx: EmitContext, op: Op, with_index: bool) -> None:
    """The pool over N, C, spatial…: missing leading axes (an unbatched 1-D input) are
    added, then removed from each output; an index never depends on them."""
    x = op.inputs[0]
    lead = x.rank - len(op.attrs["kernel"])
    missing = max(0, 2 - lead)
    src: Value | Raw = x
    if missing:
        src = Raw(ctx.emit(f"{x.name}_nc", "unsqueeze", x, axes=list(range(missing))))
    attrs = _pool_attrs(op, lead + missing)
    outs = list(op.outputs if with_index else op.outputs[:1])
    if not with_index:
        call = ctx.call("max_pool", src, **attrs)
    else:
        call = ctx.call("max_pool_with_index", src, **attrs)
    if not missing:
        ctx.assign([ctx.id(v) for v in outs] if with_index else ctx.id(outs[0]), call)
        return
    wide = [ctx.fresh(f"{v.name}_nc") for v in outs]
    ctx.assign(wide if with_index else wide[0], call)
    for v, w in zip(outs, wide):
        ctx.emit(v, "squeeze", Raw(w), axes=list(range(missing)))

