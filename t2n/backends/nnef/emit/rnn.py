"""Recurrent layers. On tract: a GRU is one ``tract_core_gru_seq`` (the whole sequence
in one kernel), an LSTM a ``tract_core_scan`` loop whose body is one matmul and one
``tract_core_lstm_epilogue`` (all gates in one pass), where the target tract has them;
otherwise, and for plain RNNs, a scan over the cell in standard operations. Weights are
passed whole, once; the time axis may be symbolic. In standard NNEF, which has no loop,
the cell is unrolled over the static sequence length.

Gate blocks come in ``rnn_scan``'s order (``t2n.ir.ops.rnn``), the order those fused
kernels read, so no weight is sliced or reordered here.
"""

from __future__ import annotations

from collections.abc import Callable

from t2n.backends.nnef.context import EmitContext
from t2n.ir import Op

LSTM_EPILOGUE = "tract_core_lstm_epilogue"


Line = tuple[str, str]


def _gate(g: str, k: int, hidden: int) -> str:
    return f"slice({g}, axes = [1], begin = [{k * hidden}], end = [{(k + 1) * hidden}])"


def cell_lines(mode: str, hidden: int, name: Callable[[str], str], x: str, h: str, c: str | None,
               w: str, b: str | None, wr: str | None, fused: bool = False) -> tuple[list[Line], str, str | None]:
    """NNEF assignments for one step: (lines, next hidden state, next cell state).
    ``fused``: the LSTM gates in one ``tract_core_lstm_epilogue``."""
    lines: list[Line] = []

    def let(hint: str, expr: str) -> str:
        n = name(hint)
        lines.append((n, expr))
        return n

    hw = let("hw", f"matmul({h}, {w}, transposeA = false, transposeB = true)")
    if mode == "lstm":
        g = let("gates", f"add({x}, {hw})")
        assert c is not None
        if fused:
            h_next, c_next = name("h_next"), name("c_next")
            lines.append((f"({h_next}, {c_next})", f"{LSTM_EPILOGUE}({g}, {c}, hidden = {hidden})"))
        else:
            i = let("i", f"sigmoid({_gate(g, 0, hidden)})")
            o = let("o", f"sigmoid({_gate(g, 1, hidden)})")
            f = let("f", f"sigmoid({_gate(g, 2, hidden)})")
            gg = let("g", f"tanh({_gate(g, 3, hidden)})")
            c_next = let("c_next", f"add(mul({f}, {c}), mul({i}, {gg}))")
            h_next = let("h_next", f"mul({o}, tanh({c_next}))")
        if wr is not None:
            h_next = let("h_proj", f"matmul({h_next}, {wr}, transposeA = false, transposeB = true)")
        return lines, h_next, c_next
    if mode == "gru":
        if b is not None:
            hw = let("hwb", f"add({hw}, unsqueeze({b}, axes = [0]))")
        z = let("z", f"sigmoid(add({_gate(x, 0, hidden)}, {_gate(hw, 0, hidden)}))")
        r = let("r", f"sigmoid(add({_gate(x, 1, hidden)}, {_gate(hw, 1, hidden)}))")
        n = let("n", f"tanh(add({_gate(x, 2, hidden)}, mul({r}, {_gate(hw, 2, hidden)})))")
        h_next = let("h_next", f"add(mul(sub(1.0, {z}), {n}), mul({z}, {h}))")
        return lines, h_next, None
    act = "tanh" if mode == "rnn_tanh" else "relu"
    h_next = let("h_next", f"{act}(add({x}, {hw}))")
    return lines, h_next, None


def rnn_operands(ctx: EmitContext, op: Op) -> tuple[str, str, str | None, str, str | None, str | None]:
    mode = op.attrs["mode"]
    ins = list(op.inputs)
    xw, h0 = ctx.arg(ins.pop(0)), ctx.arg(ins.pop(0))
    c0 = ctx.arg(ins.pop(0)) if mode == "lstm" else None
    w = ctx.arg(ins.pop(0))
    b = ctx.arg(ins.pop(0)) if mode == "gru" and ins and ins[0].rank == 1 else None
    wr = ctx.arg(ins.pop(0)) if op.attrs.get("proj") else None
    return xw, h0, c0, w, b, wr

