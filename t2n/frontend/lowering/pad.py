"""Padding: F.pad in its constant, reflect, replicate and circular modes, and the aten
ops it dispatches to. Negative padding crops: the crop is a slice, then the rest pads
(PyTorch gives the same result in every mode)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from t2n.frontend.context import LoweringContext
from t2n.frontend.registry import RuleSet
from t2n.ir import DType, Value
from t2n.ir.infer_utils import INT64_MAX

RULES = RuleSet("pad")

_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "replicate", "circular": "circular"}
_ENUM_MODES = {0: "reflect", 1: "replicate", 2: "circular", 3: "constant"}
"""``aten::_pad_enum`` numbers the modes in the order of ATen's ``padding_mode`` enum."""


def torch_pairs(ctx: LoweringContext, flat: Sequence[int], rank: int) -> list[tuple[int, int]]:
    """torch lists (before, after) from the last axis backwards; one pair per axis here."""
    if len(flat) % 2 or len(flat) // 2 > rank:
        raise ctx.unsupported(f"{len(flat)} padding sizes for a tensor of rank {rank}")
    pairs = [(0, 0)] * rank
    for i in range(len(flat) // 2):
        pairs[rank - 1 - i] = (int(flat[2 * i]), int(flat[2 * i + 1]))
    return pairs


def pad(ctx: LoweringContext, x: Value, flat: Sequence[int], mode: str, value: Any = None) -> Value:
    pairs = torch_pairs(ctx, flat, x.rank)
    b = ctx.b
    crop = [(ax, max(0, -lo), hi if hi < 0 else INT64_MAX) for ax, (lo, hi) in enumerate(pairs)
            if lo < 0 or hi < 0]
    if crop:
        x = b.op("slice", x, b.ints([c[1] for c in crop]), b.ints([c[2] for c in crop]),
                 axes=tuple(c[0] for c in crop), steps=(1,) * len(crop))
    grow = tuple((max(lo, 0), max(hi, 0)) for lo, hi in pairs)
    if not any(lo or hi for lo, hi in grow):
        return x
    for ax, (lo, hi) in enumerate(grow):
        n = x.type.shape[ax]
        if mode == "reflect" and (lo or hi) and isinstance(n, int) and max(lo, hi) >= n:
            raise ctx.unsupported(f"reflect padding of {max(lo, hi)} on an axis of size {n} (must be smaller)")
        if mode == "circular" and (lo or hi) and isinstance(n, int) and max(lo, hi) > n:
            raise ctx.unsupported(f"circular padding of {max(lo, hi)} on an axis of size {n} (at most the size)")
    fill: float | int = 0
    if mode == "constant" and value is not None:
        v = ctx.to_const(value, "value")
        fill = float(v) if x.type.dtype.is_float else (int(bool(v)) if x.type.dtype is DType.BOOL else int(v))
    return b.op("pad", x, pads=grow, mode=mode, value=fill)


@RULES.rule("aten::pad")
def pad_rule(ctx: LoweringContext) -> Value:
    mode = str(ctx.const("mode")) if ctx.has("mode") else "constant"
    if mode not in _MODES:
        raise ctx.unsupported(f"padding mode {mode!r}")
    value = ctx.optional("value") if ctx.has("value") else None
    return pad(ctx, ctx.tensor(0), ctx.ints(1), _MODES[mode], value)


@RULES.rule("aten::_pad_enum")
def pad_enum(ctx: LoweringContext) -> Value:
    mode = _ENUM_MODES.get(ctx.int("mode"))
    if mode is None:
        raise ctx.unsupported(f"padding mode number {ctx.int('mode')}")
    value = ctx.optional("value") if ctx.has("value") else None
    return pad(ctx, ctx.tensor(0), ctx.ints(1), mode, value)


@RULES.rule("aten::constant_pad_nd")
def constant_pad_nd(ctx: LoweringContext) -> Value:
    value = ctx.optional("value") if ctx.has("value") else None
    return pad(ctx, ctx.tensor(0), ctx.ints(1), "constant", value)


@RULES.rule("aten::_pad_circular")
def pad_circular(ctx: LoweringContext) -> Value:
    return pad(ctx, ctx.tensor(0), ctx.ints(1), "circular")


def _fixed_mode(mode: str, dims: int):  # type: ignore[no-untyped-def]
    def rule(ctx: LoweringContext) -> Value:
        flat = ctx.ints(1)
        if len(flat) != 2 * dims:
            raise ctx.unsupported(f"{ctx.kind} takes {2 * dims} padding sizes, got {len(flat)}")
        return pad(ctx, ctx.tensor(0), flat, mode)

    return rule


for _d in (1, 2, 3):
    RULES.add(f"aten::reflection_pad{_d}d", _fixed_mode("reflect", _d))
    RULES.add(f"aten::replication_pad{_d}d", _fixed_mode("replicate", _d))
