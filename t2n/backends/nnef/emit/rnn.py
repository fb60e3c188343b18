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

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw, literal
from t2n.backends.nnef.versions import tract_has
from t2n.ir import DType, Op
from t2n.ir.identifiers import free_name

GRU_SEQ = "tract_core_gru_seq"
LSTM_EPILOGUE = "tract_core_lstm_epilogue"

TRACT = EmitterTable("rnn/tract")
KHRONOS = EmitterTable("rnn/khronos")

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


def _operands(ctx: EmitContext, op: Op) -> tuple[str, str, str | None, str, str | None, str | None]:
    mode = op.attrs["mode"]
    ins = list(op.inputs)
    xw, h0 = ctx.arg(ins.pop(0)), ctx.arg(ins.pop(0))
    c0 = ctx.arg(ins.pop(0)) if mode == "lstm" else None
    w = ctx.arg(ins.pop(0))
    b = ctx.arg(ins.pop(0)) if mode == "gru" and ins and ins[0].rank == 1 else None
    wr = ctx.arg(ins.pop(0)) if op.attrs.get("proj") else None
    return xw, h0, c0, w, b, wr


def gru_seq_tract(ctx: EmitContext, op: Op) -> None:
    """The whole GRU sequence in one ``tract_core_gru_seq``: batch-major operands, the
    input projection already done (``projected``: only the recurrent half of ``b`` is
    read, the input half is zeros)."""
    xw, h0, _, w, b, _ = _operands(ctx, op)
    out = op.outputs[0].name
    x = ctx.emit(f"{out}_x_bt", "transpose", Raw(xw), axes=[1, 0, 2])
    h = ctx.emit(f"{out}_h0_b1", "unsqueeze", Raw(h0), axes=[1])
    bias: dict[str, Raw] = {}
    if b is not None:
        both = ctx.emit(f"{out}_b", "concat", Raw(f"[sub({b}, {b}), {b}]"), axis=0)
        bias["b"] = Raw(ctx.emit(f"{out}_b_1", "unsqueeze", Raw(both), axes=[0]))
    y_bt, h_last = ctx.fresh(f"{out}_y_bt"), ctx.fresh(f"{out}_h_b1")
    step = -1 if op.attrs.get("reverse") else 1
    ctx.assign([y_bt, h_last], ctx.call(GRU_SEQ, x=Raw(x), r=Raw(w), **bias, initial_h=Raw(h),
                                        hidden=int(op.attrs["hidden"]), chunk=step,
                                        has_bias=int(b is not None), reset_every_turn=0,
                                        emit_y=1, projected=1))
    ctx.emit(op.outputs[0], "transpose", Raw(y_bt), axes=[1, 0, 2])
    ctx.emit(op.outputs[1], "squeeze", Raw(h_last), axes=[1])


FUSED_BELOW = 2048
"""A batch times hidden size from which the LSTM and GRU steps are standard operations
in the loop rather than tract's fused kernels (``tract_core_lstm_epilogue``,
``tract_core_gru_seq``).

Measured in tract 0.23.9 (CPU time, the forms alternating, 32 to 512 steps): the fused
kernels win on small steps (hidden 32-128, batch 1: 1.6-4.3x), are even around
batch x hidden = 1024 (0.94-1.10 either way: hidden 256 batch 4, 512 batch 2, 64 batch
16), and lose from 2048: hidden 256 batch 8 ran 1.13-1.39x slower as an LSTM epilogue
and 1.35x as a GRU sequence than as the loop in standard operations, which is also
torch_to_nnef's form (artifact-speed grid, ``rnn`` cases; benchmarks/RESULTS_ARTIFACT_SPEED.md).
A symbolic batch keeps the fused kernels."""


def _fused_pays(op: Op) -> bool:
    """Whether the step is small enough for tract's fused kernels to win (FUSED_BELOW)."""
    batch = op.inputs[0].type.shape[1]  # time-major [T, B, gates]
    return not isinstance(batch, int) or batch * int(op.attrs["hidden"]) < FUSED_BELOW


@TRACT.emitter("rnn_scan")
def rnn_scan_tract(ctx: EmitContext, op: Op) -> None:
    mode, hidden = op.attrs["mode"], int(op.attrs["hidden"])
    fused = _fused_pays(op)
    # tract 0.23.9 loads an f16 gru_seq but fails to plan it (codegen): f32 only
    if mode == "gru" and fused and op.inputs[0].type.dtype is DType.F32 and tract_has(ctx, GRU_SEQ):
        gru_seq_tract(ctx, op)
        return
    xw, h0, c0, w, b, wr = _operands(ctx, op)
    body = f"t2n_{mode}_body_{len(ctx.fragments)}"
    used: set[str] = set()

    def name(hint: str) -> str:
        n = free_name(hint, lambda n: n in used or n in ("xw", "h", "c", "w", "b", "wr"))
        used.add(n)
        return n

    lines, h_next, c_next = cell_lines(mode, hidden, name, "x", "h", "c" if c0 else None, "w",
                                       "b" if b else None, "wr" if wr else None,
                                       fused=mode == "lstm" and fused and tract_has(ctx, LSTM_EPILOGUE))
    params = ["xw", "h"] + (["c"] if c0 else []) + ["w"] + (["b"] if b else []) + (["wr"] if wr else [])
    results = ["h_out", "y"] + (["c_out"] if c0 else [])
    text = [f"fragment {body}(", ",\n".join(f"    {p}: tensor<scalar>" for p in params),
            ") -> (", ",\n".join(f"    {r}: tensor<scalar>" for r in results), ")", "{",
            "    x = squeeze(xw, axes = [0]);"]
    text += [f"    {lhs} = {expr};" for lhs, expr in lines]
    text.append(f"    h_out = {ctx.call('copy', Raw(h_next))};")
    text.append(f"    y = unsqueeze({h_next}, axes = [0]);")
    if c0:
        text.append(f"    c_out = {ctx.call('copy', Raw(c_next))};")
    text.append("}")
    ctx.fragments[body] = "\n".join(text)
    step = -1 if op.attrs.get("reverse") else 1
    full = [f'("w", {w})'] + ([f'("b", {b})'] if b else []) + ([f'("wr", {wr})'] if wr else [])
    state = [f'("h", {h0}, "h_out")'] + ([f'("c", {c0}, "c_out")'] if c0 else [])
    outputs = [f'("y", "full", 0, {step})', '("h_out", "last", 0, 1)'] + \
        (['("c_out", "last", 0, 1)'] if c0 else [])
    names = [ctx.id(v) for v in op.outputs]
    call = (f"tract_core_scan(body = {literal(body)}, scan = [(\"xw\", {xw}, 0, {step})], "
            f"full = [{', '.join(full)}], state = [{', '.join(state)}], output = [{', '.join(outputs)}])")
    ctx.assign(names, call)


@KHRONOS.emitter("rnn_scan")
def rnn_scan_khronos(ctx: EmitContext, op: Op) -> None:
    mode, hidden = op.attrs["mode"], int(op.attrs["hidden"])
    steps = op.inputs[0].type.shape[0]
    if not isinstance(steps, int):
        ctx.unsupported("a recurrent layer over a dynamic axis (standard NNEF has no loop)")
        return
    xw, h, c, w, b, wr = _operands(ctx, op)
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


@TRACT.emitter("gru_sequence")
def gru_sequence_tract(ctx: EmitContext, op: Op) -> None:
    """``tract_core_gru_seq`` projecting the batch-major input itself (``projected = 0``),
    as tract's ONNX loader builds it (:mod:`t2n.passes.gru_sequence`)."""
    x, w_ih, w_hh, h0 = op.inputs[:4]
    out = op.outputs[0].name
    h = ctx.emit(f"{out}_h0_b1", "unsqueeze", h0, axes=[1])
    bias: dict[str, Raw] = {}
    if len(op.inputs) > 4:
        bias["b"] = Raw(ctx.emit(f"{out}_b_1", "unsqueeze", op.inputs[4], axes=[0]))
    y, h_last = ctx.id(op.outputs[0]), ctx.fresh(f"{out}_h_b1")
    ctx.assign([y, h_last], ctx.call(GRU_SEQ, x=Raw(ctx.arg(x)), w=Raw(ctx.arg(w_ih)), r=Raw(ctx.arg(w_hh)), **bias,
                                     initial_h=Raw(h),
                                     hidden=int(op.attrs["hidden"]), chunk=-1 if op.attrs.get("reverse") else 1,
                                     has_bias=int(len(op.inputs) > 4), reset_every_turn=0, emit_y=1,
                                     projected=0))
    ctx.emit(op.outputs[1], "squeeze", Raw(h_last), axes=[1])
