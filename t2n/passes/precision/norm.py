"""``force-norm-in-f32``: normalizations computed in f32, as PyTorch computes them.

PyTorch computes LayerNorm, GroupNorm, RMSNorm and BatchNorm of an f16 tensor in f32 and
rounds once, after the weight and bias; an f16 export that rounds the normalized value
and then again after each affine step drifts by an f16 step where the bias cancels the
scaled value (ViT's final LayerNorm in f16 misses the approximate tolerance for that).

Regions, found by the shape of the IR (whatever module or function produced it):

- mean-variance statistics: ``mean_reduce(x)``, ``sub``, its square, ``mean_reduce``,
  ``add eps``, ``rsqrt`` (or ``sqrt`` and ``div``), ``mul`` — labelled ``layer_norm``,
  ``group_norm`` (the input was reshaped into groups) or ``batch_norm`` (batch axis
  reduced) — and the same without the centring (``rms_norm``), or the fused ``rms_norm``
  op (with the ``x - mean(x)`` before it when there is one: labelled as above); each
  with the affine steps that follow it (multiplications and additions by model
  constants, through reshapes and casts);
- ``x * scale + shift`` with per-channel constants along axis 1 (batch norm with running
  statistics, as lowered and folded; ``batch_norm``);
- ``softmax`` and ``log_softmax`` (``softmax``, ``log_softmax``).
"""

from __future__ import annotations

import attrs

from t2n.ir import Graph, Op, Value
from t2n.ir.graph import constant_data
from t2n.passes.precision.base import ForceF32Pass
from t2n.passes.precision.regions import (
    LAYOUT_OPS,
    Region,
    input_dependent,
    is_float_cast,
    ordered,
    sole_user,
)

_AFFINE = ("mul", "add", "sub", "div")


def _made_by(v: Value, *kinds: str) -> Op | None:
    p = v.producer
    return p if p is not None and p.kind in kinds else None


def _squared(v: Value) -> Value | None:
    """``x`` if ``v`` is ``x * x``, ``square(x)`` or ``pow(x, 2)``."""
    p = v.producer
    if p is None:
        return None
    if p.kind == "mul" and p.inputs[0] is p.inputs[1]:
        return p.inputs[0]
    if p.kind == "square":
        return p.inputs[0]
    if p.kind == "pow":
        exponent = constant_data(p.inputs[1])
        if exponent is not None and exponent.size == 1 and float(exponent.reshape(-1)[0]) == 2.0:
            return p.inputs[0]
    return None


def _without_cast(v: Value) -> Value:
    p = v.producer
    return p.inputs[0] if p is not None and is_float_cast(p) else v


def _mean_variance_label(center: Op, x: Value) -> str:
    axes = list(center.attrs["axes"])
    if 0 in axes:
        return "batch_norm"
    if _made_by(_without_cast(x), "reshape") is not None and len(axes) > 1:
        return "group_norm"
    return "layer_norm"


def _statistics_core(graph: Graph, root: Op, dynamic: set[Value]) -> tuple[list[Op], str] | None:
    """The ops of a normalization whose inverse deviation ``root`` (an ``rsqrt`` or
    ``sqrt``) computes, up to the normalized value, and its label."""
    add = _made_by(root.inputs[0], "add")
    if add is None:
        return None
    var_in = next((x for x in add.inputs if x in dynamic), None)
    if var_in is None or any(x in dynamic for x in add.inputs if x is not var_in):
        return None
    var = _made_by(var_in, "mean_reduce")
    if var is None or var.inputs[0].producer is None:
        return None
    square = var.inputs[0].producer
    centered = _squared(var.inputs[0])
    if centered is None:
        return None
    core: list[Op] = [square, var, add, root]
    label = "rms_norm"
    sub = _made_by(centered, "sub")
    mean = _made_by(sub.inputs[1], "mean_reduce") if sub is not None else None
    if sub is not None and mean is not None and mean.inputs[0] is sub.inputs[0]:
        core = [mean, sub, *core]
        label = _mean_variance_label(mean, sub.inputs[0])
    want = "mul" if root.kind == "rsqrt" else "div"
    norm = next((u for u in graph.users(root.output) if u.kind == want and centered in u.inputs
                 and (want == "mul" or u.inputs[1] is root.output)), None)
    if norm is None:
        return None
    return [*core, norm], label


def _centred(rms: Op) -> tuple[list[Op], str]:
    """The ops and label of a fused ``rms_norm``: with the centring before it when its
    operand is ``x - mean(x)`` over the same axes (how layer, group, instance and batch
    norms over batch statistics are lowered), else alone (``rms_norm``)."""
    sub = _made_by(rms.inputs[0], "sub")
    mean = _made_by(sub.inputs[1], "mean_reduce") if sub is not None else None
    if sub is None or mean is None or mean.inputs[0] is not sub.inputs[0] or \
            list(mean.attrs["axes"]) != list(rms.attrs["axes"]):
        return [rms], "rms_norm"
    return [mean, sub, rms], _centred_label(mean)


def _centred_label(mean: Op) -> str:
    """batch_norm when the batch axis is reduced, group_norm when reshapes before the
    statistics changed the size of axis 1 (channels into groups), else layer_norm."""
    if 0 in mean.attrs["axes"]:
        return "batch_norm"
    x = _without_cast(mean.inputs[0])
    origin = x
    while (p := _made_by(origin, "reshape")) is not None:
        origin = _without_cast(p.inputs[0])
    if origin is not x and origin.rank > 1 and x.rank > 1 and origin.type.shape[1] != x.type.shape[1]:
        return "group_norm"
    return "layer_norm"


def _affine_after(graph: Graph, v: Value, dynamic: set[Value], claimed: set[Op]) -> list[Op]:
    """The affine steps (by model constants), reshapes and casts that follow ``v`` alone,
    without trailing reshapes or casts."""
    out: list[Op] = []
    cur = v
    for _ in range(8):
        u = sole_user(graph, cur)
        if u is None or u in claimed:
            break
        layout = u.kind in LAYOUT_OPS and u.inputs[0] is cur
        affine = (u.kind in _AFFINE and len(u.inputs) == 2 and u.output.type.shape == cur.type.shape
                  and not any(x in dynamic for x in u.inputs if x is not cur)
                  and (u.kind in ("mul", "add") or u.inputs[0] is cur))
        if not (is_float_cast(u) or layout or affine):
            break
        out.append(u)
        cur = u.output
    while out and (is_float_cast(out[-1]) or out[-1].kind in LAYOUT_OPS):
        out.pop()
    return out


def _per_channel(v: Value, x: Value) -> bool:
    """A model constant that varies along axis 1 of ``x`` at most."""
    shape = [1] * (x.rank - v.rank) + list(v.type.shape)
    return x.rank >= 2 and len(shape) == x.rank and all(d == 1 for i, d in enumerate(shape) if i != 1)


def _running_stats(graph: Graph, mul: Op, dynamic: set[Value]) -> list[Op] | None:
    """``x * scale + shift`` with per-channel constants (batch norm at inference)."""
    x = next((v for v in mul.inputs if v in dynamic), None)
    scale = next((v for v in mul.inputs if v is not x), None)
    if x is None or scale is None or scale in dynamic or not _per_channel(scale, x):
        return None
    add = sole_user(graph, mul.output)
    if add is None or add.kind != "add":
        return None
    shift = next((v for v in add.inputs if v is not mul.output), None)
    if shift is None or shift in dynamic or not _per_channel(shift, x) or add.output.type.shape != x.type.shape:
        return None
    return [mul, add]


@attrs.frozen
class ForceNormInF32(ForceF32Pass):
    """Compute every normalization and softmax of a reduced-precision graph in f32."""

    name = "force-norm-in-f32"

    def find(self, graph: Graph) -> list[Region]:
        dynamic = input_dependent(graph)
        claimed: set[Op] = set()
        regions: list[Region] = []

        def claim(ops: list[Op], label: str) -> None:
            if ops and not claimed.intersection(ops):
                claimed.update(ops)
                regions.append(Region(ordered(graph, ops), label))

        for op in graph.ops():
            if op.kind in ("rsqrt", "sqrt"):
                found = _statistics_core(graph, op, dynamic)
                if found is not None:
                    core, label = found
                    claim([*core, *_affine_after(graph, core[-1].output, dynamic, claimed | set(core))], label)
            elif op.kind == "rms_norm":
                core, label = _centred(op)
                claim([*core, *_affine_after(graph, op.output, dynamic, claimed | set(core))], label)
        for op in graph.ops():
            if op in claimed:
                continue
            if op.kind in ("softmax", "log_softmax"):
                claim([op], op.kind)
            elif op.kind == "mul" and op.output.type.dtype.is_float:
                claim(_running_stats(graph, op, dynamic) or [], "batch_norm")
        position = {op: i for i, op in enumerate(graph.ops())}
        return sorted(regions, key=lambda r: position[r.ops[0]])


__all__ = ["ForceNormInF32"]
