"""LSTM, GRU and Elman RNN layers and cells.

Each direction of each layer becomes one ``rnn_scan`` op over a time-major sequence:
the input projection of all steps is one matmul outside the loop; the loop body only
multiplies by the recurrent weight, one matmul for all gates. The gate rows are put in
the order tract's fused LSTM/GRU kernels read (``GATE_ORDER``) once, on the weights,
never per step.
"""

from __future__ import annotations

from typing import Any

from t2n.frontend.context import LoweringContext
from t2n.frontend.helpers import squeeze, transpose, unsqueeze
from t2n.frontend.registry import RuleSet
from t2n.ir import Value
from t2n.ir.ops.rnn import GATE_ORDER, GATES

RULES = RuleSet("rnn")


def _linear(ctx: LoweringContext, x: Value, w: Value, *biases: Value | None) -> Value:
    y = ctx.b.op("matmul", x, w, transpose_a=False, transpose_b=True)
    for bias in biases:
        if bias is not None:
            y = ctx.b.op("add", y, bias)
    return y


def _gate_rows(ctx: LoweringContext, w: Value | None, mode: str, hidden: int) -> Value | None:
    """``w``'s gate blocks (rows, axis 0) from PyTorch's order into ``GATE_ORDER[mode]``."""
    order = GATE_ORDER.get(mode)
    if w is None or order is None:
        return w
    b = ctx.b
    blocks = [b.op("slice", w, b.ints([k * hidden]), b.ints([(k + 1) * hidden]), axes=(0,), steps=(1,))
              for k in order]
    return b.op("concat", *blocks, axis=0, name=f"{w.name}_gates")


def _row(ctx: LoweringContext, stacked: Value, i: int) -> Value:
    """``stacked[i]`` of a [L*D, B, H] initial state."""
    b = ctx.b
    s = b.op("slice", stacked, b.ints([i]), b.ints([i + 1]), axes=(0,), steps=(1,))
    return squeeze(b, s, [0])


def direction(ctx: LoweringContext, mode: str, x: Value, h0: Value, c0: Value | None,
              weights: list[Value], has_biases: bool, proj: bool, reverse: bool) -> tuple[Value, ...]:
    """One direction of one layer over time-major ``x``: (outputs, h_last[, c_last])."""
    w_ih: Value | None = weights[0]
    w_hh: Value | None = weights[1]
    b_ih = weights[2] if has_biases else None
    b_hh = weights[3] if has_biases else None
    w_hr = weights[-1] if proj else None
    hidden = int(weights[1].type.shape[0]) // GATES[mode]  # type: ignore[call-overload]
    dt = x.type.dtype
    cast = [ctx.b.cast(v, dt) if v is not None and v.type.dtype is not dt else v
            for v in (w_ih, w_hh, b_ih, b_hh, w_hr)]
    w_ih, w_hh, b_ih, b_hh = (_gate_rows(ctx, v, mode, hidden) for v in cast[:4])
    w_hr = cast[4]
    assert w_ih is not None and w_hh is not None
    # the recurrent bias joins the input projection, except in GRU's reset gate
    xw = _linear(ctx, x, w_ih, b_ih, b_hh if mode != "gru" else None)
    inputs = [xw, h0] + ([c0] if mode == "lstm" and c0 is not None else []) + [w_hh]
    if mode == "gru" and b_hh is not None:
        inputs.append(b_hh)
    if w_hr is not None:
        inputs.append(w_hr)
    return ctx.b.multi("rnn_scan", *inputs, mode=mode, hidden=hidden, reverse=reverse, proj=proj)


def recurrent_layer(ctx: LoweringContext, mode: str) -> tuple[Value, ...]:
    """``aten::lstm`` / ``gru`` / ``rnn_*`` over a padded sequence: the outputs and the
    final states stacked [L*D, B, H], batch-first and unbatched inputs alike."""
    if not ctx.has("batch_first"):
        raise ctx.unsupported("packed sequences (pack_padded_sequence): pass a padded tensor instead")
    x = ctx.tensor(0)
    hx_raw: Any = ctx.raw(1)
    hx = list(hx_raw) if isinstance(hx_raw, (list, tuple)) else [hx_raw]
    params: list[Value] = [ctx.as_value(p) for p in ctx.raw(2)]
    has_biases, layers = ctx.bool(3), ctx.int(4)
    if ctx.bool(6):
        raise ctx.unsupported("a recurrent layer in training mode (dropout between layers)")
    bidirectional, batch_first = ctx.bool(7), ctx.bool(8)
    b = ctx.b
    unbatched = x.rank == 2
    if unbatched:
        x = unsqueeze(b, x, [1 if not batch_first else 0])
        hx = [unsqueeze(b, h, [1]) for h in hx]
    if batch_first:
        x = transpose(b, x, [1, 0, 2])
    x, states = _run_layers(ctx, mode, x, hx, params, layers, 2 if bidirectional else 1, has_biases)
    out = transpose(b, x, [1, 0, 2]) if batch_first else x
    stacked = [b.op("concat", *[unsqueeze(b, s, [0]) for s in group], axis=0) for group in states]
    if unbatched:
        out = squeeze(b, out, [1 if not batch_first else 0])
        stacked = [squeeze(b, s, [1]) for s in stacked]
    return (out, *stacked)


def _run_layers(ctx: LoweringContext, mode: str, x: Value, hx: list[Value], params: list[Value],
                layers: int, dirs: int, has_biases: bool) -> tuple[Value, list[list[Value]]]:
    """Every direction of every layer over time-major ``x``: the last layer's outputs and
    the final states (h, then c for an LSTM), each a list in layer-then-direction order."""
    per_dir = len(params) // (layers * dirs)
    proj = per_dir == (4 if has_biases else 2) + 1
    h_last: list[Value] = []
    c_last: list[Value] = []
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            weights = params[k * per_dir:(k + 1) * per_dir]
            h0 = _row(ctx, hx[0], k)
            c0 = _row(ctx, hx[1], k) if mode == "lstm" else None
            res = direction(ctx, mode, x, h0, c0, weights, has_biases, proj, d == 1)
            outs.append(res[0])
            h_last.append(res[1])
            if mode == "lstm":
                c_last.append(res[2])
        x = outs[0] if dirs == 1 else ctx.b.op("concat", *outs, axis=2)
    return x, [h_last] + ([c_last] if mode == "lstm" else [])


@RULES.rule("aten::lstm")
def lstm(ctx: LoweringContext) -> tuple[Value, ...]:
    return recurrent_layer(ctx, "lstm")


@RULES.rule("aten::gru")
def gru(ctx: LoweringContext) -> tuple[Value, ...]:
    return recurrent_layer(ctx, "gru")


@RULES.rule("aten::rnn_tanh", "aten::rnn_relu")
def rnn(ctx: LoweringContext) -> tuple[Value, ...]:
    return recurrent_layer(ctx, ctx.kind.removeprefix("aten::"))


@RULES.rule("aten::_pack_padded_sequence", "aten::_pad_packed_sequence")
def packed_sequence(ctx: LoweringContext) -> Value:
    raise ctx.unsupported("packed sequences (pack_padded_sequence): their layout depends on the "
                          "lengths; run the layer on the padded tensor and mask the outputs instead")


@RULES.rule("aten::lstm_cell", "aten::gru_cell", "aten::rnn_tanh_cell", "aten::rnn_relu_cell")
def cell(ctx: LoweringContext) -> Value | tuple[Value, ...]:
    """One step: a one-step ``rnn_scan``."""
    mode = ctx.kind.removeprefix("aten::").removesuffix("_cell")
    x = ctx.tensor(0)
    hx_raw: Any = ctx.raw(1)
    hx = list(hx_raw) if isinstance(hx_raw, (list, tuple)) else [hx_raw]
    weights = [ctx.tensor(2), ctx.tensor(3)]
    b_ih, b_hh = ctx.optional_tensor(4), ctx.optional_tensor(5)
    has_biases = b_ih is not None
    if b_ih is not None and b_hh is not None:
        weights += [b_ih, b_hh]
    b = ctx.b
    unbatched = x.rank == 1
    if unbatched:
        x = unsqueeze(b, x, [0])
        hx = [unsqueeze(b, h, [0]) for h in hx]
    res = direction(ctx, mode, unsqueeze(b, x, [0]), hx[0], hx[1] if mode == "lstm" else None,
                    weights, has_biases, False, False)
    outs = [res[1]] + ([res[2]] if mode == "lstm" else [])
    if unbatched:
        outs = [squeeze(b, o, [0]) for o in outs]
    return (outs[0], outs[1]) if mode == "lstm" else outs[0]
