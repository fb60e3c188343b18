"""tract's emitters of the rnn family (the forms both targets share are in
:mod:`t2n.backends.nnef.emit.rnn`)."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw, literal
from t2n.backends.nnef.emit.rnn import LSTM_EPILOGUE, cell_lines, rnn_operands
from t2n.backends.tract.versions import tract_has
from t2n.ir import DType, Op
from t2n.ir.dims import Dim
from t2n.ir.identifiers import free_name

GRU_SEQ = "tract_core_gru_seq"


TRACT = EmitterTable("rnn/tract")


def gru_seq_tract(ctx: EmitContext, op: Op) -> None:
    """The whole GRU sequence in one ``tract_core_gru_seq``: batch-major operands, the
    input projection already done (``projected``: only the recurrent half of ``b`` is
    read, the input half is zeros)."""
    xw, h0, _, w, b, _ = rnn_operands(ctx, op)
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
``tract_core_gru_seq``), unless the sequence is short (``FUSED_STEPS``).

Measured in tract 0.23.9 (CPU time, the forms alternating, 32 to 512 steps): the fused
kernels win on small steps (hidden 32-128, batch 1: 1.6-4.3x), are even around
batch x hidden = 1024 (0.94-1.10 either way: hidden 256 batch 4, 512 batch 2, 64 batch
16), and lose from 2048 over long sequences: at hidden 256 batch 8, 64 steps, the LSTM
epilogue ran 1.12x the best peer (the loop 1.00-1.01) and the GRU sequence 1.33-1.43x
(1.05-1.11 both ways; the loop 0.98-1.00); at 32 steps the GRU 1.09x; at hidden 512
batch 8, 64 steps, the LSTM 1.06-1.10x, the GRU 1.01-1.04x. The loop in standard
operations, also torch_to_nnef's form, loads 2.1-8x slower than the ONNX path (16-39 ms
against 2-15 ms: tract types and optimises its body, and its scan tries each axis change
of the body through every op of it, about 1 ms per op at hidden 256: 5 ms for a 4-op
body, 17 ms for the LSTM's 17 ops, 10.7 ms even for the body tract itself ends with), the
fused forms 0.5-1.1x; so over
at most ``FUSED_STEPS`` steps, where the kernels run even with the loop, they are kept
(artifact-speed grid, ``rnn`` cases, and hidden 256-512 at batch 8 over 8-64 steps; load
average 7-10; benchmarks/RESULTS_ARTIFACT_SPEED.md). A symbolic batch keeps the fused
kernels."""

FUSED_STEPS = 16
"""The longest sequence on which a step from ``FUSED_BELOW`` on still takes the fused
kernels: at batch 8, over 8 steps, the LSTM epilogue ran 1.00-1.02x the best peer (hidden
256, also both ways) and 1.04-1.05x (hidden 512), the GRU sequence 0.99-1.01x; over 16
steps the GRU 1.02-1.03x (hidden 256) and 1.00-1.01x (512), the LSTM 1.02x (256), each
loading 3-6x faster than the loop; at 32 steps the GRU at hidden 256 ran 1.09x."""


def fused_pays(batch: Dim, hidden: int, steps: Dim, kernels: str = "auto") -> bool:
    """Whether a recurrent step takes tract's fused kernels: as ``kernels``
    (``TractNNEF(recurrent_kernels=...)``) says, or where they are the faster form
    (``FUSED_BELOW``, ``FUSED_STEPS``); a symbolic batch keeps them."""
    if kernels != "auto":
        return kernels == "fused"
    if not isinstance(batch, int) or batch * hidden < FUSED_BELOW:
        return True
    return isinstance(steps, int) and steps <= FUSED_STEPS


def _fused_pays(ctx: EmitContext, op: Op) -> bool:
    steps, batch = op.inputs[0].type.shape[:2]  # time-major [T, B, gates]
    return fused_pays(batch, int(op.attrs["hidden"]), steps, getattr(ctx.target, "recurrent_kernels", "auto"))


def _shared_body(ctx: EmitContext, mode: str, signature_and_body: str) -> str:
    """The name of the loop-body fragment with this text: layers and directions of the
    same sizes share one (tract parses and types each fragment it is given, so a model
    with many recurrent loops loads faster with one body each kind)."""
    for name, text in ctx.fragments.items():
        if name.startswith(f"t2n_{mode}_body_") and text == f"fragment {name}(\n{signature_and_body}":
            return name
    name = f"t2n_{mode}_body_{len(ctx.fragments)}"
    ctx.fragments[name] = f"fragment {name}(\n{signature_and_body}"
    return name


@TRACT.emitter("rnn_scan")
def rnn_scan_tract(ctx: EmitContext, op: Op) -> None:
    mode, hidden = op.attrs["mode"], int(op.attrs["hidden"])
    fused = _fused_pays(ctx, op)
    # tract 0.23.9 loads an f16 gru_seq but fails to plan it (codegen): f32 only
    if mode == "gru" and fused and op.inputs[0].type.dtype is DType.F32 and tract_has(ctx, GRU_SEQ):
        gru_seq_tract(ctx, op)
        return
    xw, h0, c0, w, b, wr = rnn_operands(ctx, op)
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
    text = [",\n".join(f"    {p}: tensor<scalar>" for p in params),
            ") -> (", ",\n".join(f"    {r}: tensor<scalar>" for r in results), ")", "{",
            "    x = squeeze(xw, axes = [0]);"]
    text += [f"    {lhs} = {expr};" for lhs, expr in lines]
    text.append(f"    h_out = {ctx.call('copy', Raw(h_next))};")
    text.append(f"    y = unsqueeze({h_next}, axes = [0]);")
    if c0:
        text.append(f"    c_out = {ctx.call('copy', Raw(c_next))};")
    text.append("}")
    body = _shared_body(ctx, mode, "\n".join(text))
    step = -1 if op.attrs.get("reverse") else 1
    full = [f'("w", {w})'] + ([f'("b", {b})'] if b else []) + ([f'("wr", {wr})'] if wr else [])
    state = [f'("h", {h0}, "h_out")'] + ([f'("c", {c0}, "c_out")'] if c0 else [])
    outputs = [f'("y", "full", 0, {step})', '("h_out", "last", 0, 1)'] + \
        (['("c_out", "last", 0, 1)'] if c0 else [])
    names = [ctx.id(v) for v in op.outputs]
    call = (f"tract_core_scan(body = {literal(body)}, scan = [(\"xw\", {xw}, 0, {step})], "
            f"full = [{', '.join(full)}], state = [{', '.join(state)}], output = [{', '.join(outputs)}])")
    ctx.assign(names, call)



@TRACT.emitter("tract_gru_seq")
def gru_sequence_tract(ctx: EmitContext, op: Op) -> None:
    """``tract_core_gru_seq`` projecting the batch-major input itself (``projected = 0``),
    as tract's ONNX loader builds it (:mod:`t2n.backends.tract.passes.gru_sequence`)."""
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
