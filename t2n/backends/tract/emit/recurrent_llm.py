"""The recurrences of hybrid language models (:mod:`t2n.ir.ops.recurrent_llm`) as one
``tract_core_scan`` loop each over the tokens of a call (a symbolic count), the state
carried from step to step and returned as the last state.

``gated_delta_rule``: the L2 normalisation, scaling and decay exponentials are computed
for every token at once before the loop; the body is three matmuls (``kᵀS``, the rank-1
update, ``qᵀS``). When the model computes in f16 with heads of width 128 and the target
has it, the body is tract's own ``tract_transformers_gdn_recurrent`` (f16 q/k/v/beta, f32
decay and state, the normalisation included: exactly the f16 model's arithmetic).

``ssm_scan``: the body is ``h = a·h + u`` and the readout ``Σ h·c``; the discretisation
(``exp(A·dt)``, ``dt·B·x``) is computed for every token at once before the loop.

Standard NNEF has no loop, and these loops run over a symbolic length: Khronos refuses
(``t2n.backends.khronos.refusals``).
"""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw, literal
from t2n.backends.tract.versions import tract_has
from t2n.ir import DType, Op, Value

TRACT = EmitterTable("recurrent_llm/tract")

GDN_RECURRENT = "tract_transformers_gdn_recurrent"
GDN_WIDTH = 128
"""The only head width tract's ``tract_transformers_gdn_recurrent`` computes."""


def _f32(ctx: EmitContext, v: Value, hint: str) -> str:
    if v.type.dtype is DType.F32:
        return ctx.arg(v)
    return ctx.emit(hint, "tract_core_cast", v, to="f32")


def _fragment(ctx: EmitContext, stem: str, params: list[str], results: list[str], lines: list[str]) -> str:
    body = f"t2n_{stem}_body_{len(ctx.fragments)}"
    ctx.fragments[body] = "\n".join([
        f"fragment {body}(", ",\n".join(f"    {p}: tensor<scalar>" for p in params), ") -> (",
        ",\n".join(f"    {r}: tensor<scalar>" for r in results), ")", "{", *(f"    {x};" for x in lines), "}"])
    return body


def _scan(ctx: EmitContext, body: str, scanned: list[tuple[str, str, int]], state: tuple[str, str, str],
          output: tuple[str, int], names: list[str]) -> None:
    scans = ", ".join(f"({literal(p)}, {t}, {axis}, 1)" for p, t, axis in scanned)
    outputs = f"({literal(output[0])}, \"full\", {output[1]}, 1), ({literal(state[2])}, \"last\", 0, 1)"
    call = (f"tract_core_scan(body = {literal(body)}, scan = [{scans}], full = [], "
            f"state = [({literal(state[0])}, {state[1]}, {literal(state[2])})], output = [{outputs}])")
    ctx.assign(names, call)


def _uses_tract_gdn(ctx: EmitContext, op: Op) -> bool:
    q, k, v, _, beta, _ = op.inputs
    return (bool(op.attrs.get("qk_l2norm")) and tract_has(ctx, GDN_RECURRENT)
            and all(x.type.dtype is DType.F16 for x in (q, k, v, beta))
            and q.type.shape[3] == GDN_WIDTH and v.type.shape[3] == GDN_WIDTH)


@TRACT.emitter("gated_delta_rule")
def gated_delta_rule_tract(ctx: EmitContext, op: Op) -> None:
    q, k, v, g, beta, state = op.inputs
    out = op.outputs[0].name
    heads_first = [0, 2, 1, 3]
    names = [ctx.fresh(f"{out}_bhtd"), ctx.id(op.outputs[1])]
    if _uses_tract_gdn(ctx, op):
        # tract 0.23.9 reads one token as [B, 1, H, W] (and the state as [B, H, W, W]):
        # the loop runs over axis 1 of the operands as they are
        ctx.use_registry("tract_transformers")
        body = _fragment(ctx, "gdn", ["q", "k", "v", "g", "b", "s"], ["o", "s_out"], [
            f"o, s_out = {GDN_RECURRENT}(query = q, key = k, value = v, log_decay = g, beta = b, initial_state = s)"])
        _scan(ctx, body, [(n, ctx.arg(x), 1) for n, x in zip("qkvgb", (q, k, v, g, beta))],
              ("s", ctx.arg(state), "s_out"), ("o", 1), [ctx.id(op.outputs[0]), ctx.id(op.outputs[1])])
        return
    qf, kf, vf, bf = (_f32(ctx, x, f"{out}_{n}_f32") for n, x in (("q", q), ("k", k), ("v", v), ("beta", beta)))
    if op.attrs.get("qk_l2norm"):
        qf, kf = (ctx.emit(f"{out}_{n}_unit", "mul", Raw(x), Raw(ctx.call(
            "rsqrt", Raw(ctx.call("add", Raw(ctx.call("sum_reduce", Raw(ctx.call("mul", Raw(x), Raw(x))), axes=[3])),
                                  1e-6)))))
                  for n, x in (("q", qf), ("k", kf)))
    scale = 1.0 / float(int(q.type.shape[3])) ** 0.5  # type: ignore[call-overload]
    qf = ctx.emit(f"{out}_q_scaled", "mul", Raw(qf), scale)
    qs, ks, vs = (ctx.emit(f"{out}_{n}_bhtd", "transpose", Raw(x), axes=heads_first)
                  for n, x in (("q", qf), ("k", kf), ("v", vf)))
    decay = ctx.emit(f"{out}_decay", "unsqueeze", Raw(ctx.call("transpose", Raw(ctx.call("exp", g)), axes=[0, 2, 1])),
                     axes=[3])
    bs = ctx.emit(f"{out}_beta_bht1", "unsqueeze", Raw(ctx.call("transpose", Raw(bf), axes=[0, 2, 1])), axes=[3])
    body = _fragment(ctx, "gdn", ["q", "k", "v", "d", "b", "s"], ["o", "s_out"], [
        "s_decayed = mul(s, d)",
        "remembered = matmul(k, s_decayed, transposeA = false, transposeB = false)",
        "delta = mul(sub(v, remembered), b)",
        "s_out = add(s_decayed, matmul(k, delta, transposeA = true, transposeB = false))",
        "o = matmul(q, s_out, transposeA = false, transposeB = false)"])
    _scan(ctx, body, [("q", qs, 2), ("k", ks, 2), ("v", vs, 2), ("d", decay, 2), ("b", bs, 2)],
          ("s", ctx.arg(state), "s_out"), ("o", 2), names)
    if v.type.dtype is DType.F32:
        ctx.emit(op.outputs[0], "transpose", Raw(names[0]), axes=heads_first)
    else:
        back = ctx.emit(f"{out}_f32", "transpose", Raw(names[0]), axes=heads_first)
        ctx.emit(op.outputs[0], "tract_core_cast", Raw(back), to=v.type.dtype.value)


@TRACT.emitter("ssm_scan")
def ssm_scan_tract(ctx: EmitContext, op: Op) -> None:
    """The body keeps the token axis (length 1 per step) on every tensor, the state
    included, so that no axis is squeezed inside the loop."""
    decay, update, readout, state = op.inputs
    last = update.rank - 1
    body = _fragment(ctx, "ssm", ["a", "u", "c", "h"], ["y", "h_out"], [
        "h_out = add(mul(a, h), u)",
        f"y = squeeze(sum_reduce(mul(h_out, c), axes = [{last}]), axes = [{last}])"])
    out = op.outputs[0].name
    h0 = ctx.emit(f"{out}_h0", "unsqueeze", state, axes=[1])
    h_last = ctx.fresh(f"{out}_h_last")
    _scan(ctx, body, [("a", ctx.arg(decay), 1), ("u", ctx.arg(update), 1), ("c", ctx.arg(readout), 1)],
          ("h", h0, "h_out"), ("y", 1), [ctx.id(op.outputs[0]), h_last])
    ctx.emit(op.outputs[1], "squeeze", Raw(h_last), axes=[1])
