"""Emitters of the ops of a graph read from NNEF (:mod:`t2n.backends.nnef.reader.statements`):
each writes its assignment back as it was read, with its operands' current names, the
fragments it calls, the tract registries its operations need and its ``graph.quant``
entries. On both targets: what a read document holds is the reader's business."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, literal
from t2n.backends.nnef.reader.statements import expression, fragment
from t2n.backends.nnef.reader.tree import calls, to_text
from t2n.ir import Op

COMMON = EmitterTable("nnef_statement")

REGISTRY_PREFIXES = {"tract_transformers_": "tract_transformers", "tract_extra_": "tract_extra",
                     "tract_pulse_": "tract_pulse", "tract_onnx_": "tract_onnx",
                     "tract_resource_": "tract_resource"}
"""The tract registry an operation needs, by name prefix (``tract_core`` is always on)."""


def registry_of(name: str) -> str | None:
    return next((r for p, r in REGISTRY_PREFIXES.items() if name.startswith(p)), None)


def _quant(ctx: EmitContext, op: Op, names: list[str]) -> None:
    for name, entry in zip(names, op.attrs.get("quant", ())):
        if entry:
            ctx.quant_entries[name] = entry


@COMMON.emitter("nnef", "nnef_stateful")
def statement(ctx: EmitContext, op: Op) -> None:
    rhs = expression(op.attrs["expr"])
    for text in op.attrs.get("fragments", ()):
        ctx.fragments.setdefault(fragment(text).name, text)
    for c in calls(rhs):
        reg = registry_of(c.name)
        if reg is not None:
            ctx.use_registry(reg)
    text = to_text(rhs, lambda i: ctx.arg(op.inputs[i]))
    names = [ctx.id(v) for v in op.outputs]
    form = op.attrs.get("form", "one")
    if form == "array":
        ctx.lines.append(f"    [{', '.join(names)}] = {text};")
    else:
        ctx.assign(names[0] if form == "one" else names, text)
    _quant(ctx, op, names)


@COMMON.emitter("nnef_variable")
def variable(ctx: EmitContext, op: Op) -> None:
    name = ctx.id(op.output)
    label = ctx.add_tensor(op.attrs["label"], op.attrs["data"], op.output.type.dtype)
    generic = op.attrs.get("generic")
    head = f"variable<{generic}>" if generic else "variable"
    ctx.assign(name, f"{head}(shape = {literal(list(op.attrs['shape']))}, label = {literal(label)})")
    _quant(ctx, op, [name])
