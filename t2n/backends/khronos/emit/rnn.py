"""Khronos NNEF's emitters of the rnn family (the forms both targets share are in
:mod:`t2n.backends.nnef.emit.rnn`)."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.backends.nnef.emit.rnn import cell_lines, rnn_operands
from t2n.ir import Op

KHRONOS = EmitterTable("rnn/khronos")


@KHRONOS.emitter("rnn_scan")
def rnn_scan_khronos(ctx: EmitContext, op: Op) -> None:
    mode, hidden = op.attrs["mode"], int(op.attrs["hidden"])
    steps = op.inputs[0].type.shape[0]
    if not isinstance(steps, int):
        ctx.unsupported("a recurrent layer over a dynamic axis (standard NNEF has no loop)")
        return
    xw, h, c, w, b, wr = rnn_operands(ctx, op)
    order = range(steps - 1, -1, -1) if op.attrs.get("reverse") else range(steps)
    ys: dict[int, str] = {}
    for t in order:
        x = ctx.emit(f"{op.outputs[0].name}_x{t}", "squeeze",
                     Raw(f"slice({xw}, axes = [0], begin = [{t}], end = [{t + 1}])"), axes=[0])
        def name(hint: str, t: int = t) -> str:
            return ctx.fresh(f"{op.outputs[0].name}_{hint}{t}")

        lines, h, c_new = cell_lines(mode, hidden, name, x, h, c, w, b, wr)
        for lhs, expr in lines:
            ctx.assign(lhs, expr)
        c = c_new if c_new is not None else c
        ys[t] = ctx.emit(f"{op.outputs[0].name}_y{t}", "unsqueeze", Raw(h), axes=[0])
    out = op.outputs
    ctx.assign(ctx.id(out[0]), f"concat([{', '.join(ys[t] for t in range(steps))}], axis = 0)")
    ctx.assign(ctx.id(out[1]), ctx.call("copy", Raw(h)))
    if mode == "lstm":
        ctx.assign(ctx.id(out[2]), ctx.call("copy", Raw(c)))

