"""graph.quant, the standard NNEF file listing quantized tensors, for the quantized ops
(written by tract's emitters, :mod:`t2n.backends.tract.emit.quant`; Khronos NNEF refuses
them)."""

from __future__ import annotations

import numpy as np

from t2n.backends.nnef.context import EmitContext, nnef_float
from t2n.ir import Graph


def graph_quant_text(ctx: EmitContext, graph: Graph) -> str | None:
    """graph.quant: one ``zero_point_linear_quantize`` line per i8 weight quantized per
    tensor (tract reads those weights as QI8; per-channel scales have no graph.quant form
    and are written on the ops). ``None`` when there is none."""
    lines: dict[str, str] = {}
    for op in graph.ops():
        if op.kind not in ("qconv", "qlinear") or len(op.attrs["w_scales"]) != 1:
            continue
        w = op.inputs[1]
        if w.producer is None or w.producer.kind not in ("variable", "const"):
            continue
        name = ctx.id(w)
        lines[name] = (f'"{name}": zero_point_linear_quantize(zero_point = {int(op.attrs["w_zero_point"])}, '
                       f'scale = {nnef_float(float(np.float32(op.attrs["w_scales"][0])))}, bits = 8, '
                       "signed = true, symmetric = false);")
    return "\n".join(lines.values()) + "\n" if lines else None

