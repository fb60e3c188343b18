"""tract's emitters of the scan family (cumulative sums): standard NNEF has no form for these
ops, so Khronos NNEF refuses them."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw, literal
from t2n.backends.tract.versions import NATIVE_OPS, require
from t2n.ir import Op

TRACT = EmitterTable("scan/tract")


@TRACT.emitter("cumsum_scan")
def cumsum_scan_tract(ctx: EmitContext, op: Op) -> None:
    axis = int(op.attrs["axis"])
    x, zeros = ctx.arg(op.inputs[0]), ctx.arg(op.inputs[1])
    body = f"t2n_cumsum_body_{len(ctx.fragments)}"
    ctx.fragments[body] = "\n".join([
        f"fragment {body}(", "    x: tensor<scalar>,", "    acc: tensor<scalar>", ") -> (",
        "    acc_out: tensor<scalar>,", "    y: tensor<scalar>", ")", "{",
        "    acc_out = add(acc, x);", f"    y = {ctx.call('copy', Raw('acc_out'))};", "}"])
    call = (f"tract_core_scan(body = {literal(body)}, scan = [(\"x\", {x}, {axis}, 1)], full = [], "
            f"state = [(\"acc\", {zeros}, \"acc_out\")], output = [(\"y\", \"full\", {axis}, 1)])")
    ctx.assign(ctx.id(op.output), call)


@TRACT.emitter("cumsum")
def cumsum_tract(ctx: EmitContext, op: Op) -> None:
    name = NATIVE_OPS["cumsum"]
    if require(ctx, name, "a cumulative sum written as one op"):
        axis = int(op.attrs["axis"])
        ctx.assign(ctx.id(op.output),
                   f"{name}({ctx.arg(op.inputs[0])}, axis = {axis}, exclusive = false, reverse = false)")

