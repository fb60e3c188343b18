"""Padding: F.pad in its constant, reflect, replicate and circular modes, and the aten
ops it dispatches to. Negative padding crops: the crop is a slice, then the rest pads
(PyTorch gives the same result in every mode)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from t2n.frontend.context import LoweringContext, UnsupportedHere
from t2n.frontend.helpers import dim_value, i64
from t2n.frontend.registry import RuleSet
from t2n.ir import DType, Value
from t2n.ir.dims import dim_symbols, is_data_symbol
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
    return _padded(ctx, _MODES[mode], value)


def _padded(ctx: LoweringContext, mode: str, value: Any) -> Value:
    """Amounts known at export (folded from constants and sizes), else one computed amount."""
    try:
        amounts = ctx.ints(1)
    except UnsupportedHere:
        at = _computed_amount(ctx.raw(1))
        if at is None:
            raise
        return pad_to_length(ctx, ctx.tensor(0), ctx.raw(1), at, mode, value)
    return pad(ctx, ctx.tensor(0), amounts, mode, value)


def _computed_amount(amounts: Any) -> int | None:
    """The position in torch's padding list of the one amount computed in the model (from
    sizes that come from tensor data), or ``None`` when all are numbers."""
    if not isinstance(amounts, (list, tuple)):
        return None
    computed = [i for i, a in enumerate(amounts) if isinstance(a, Value) and not _is_number(a)]
    return computed[0] if computed else None


def _is_number(v: Value) -> bool:
    return v.known is not None and v.known.size == 1 and isinstance(v.known.reshape(()).item(), (int, np.integer))


def pad_to_length(ctx: LoweringContext, x: Value, amounts: Sequence[Any], at: int, mode: str, value: Any) -> Value:
    """``F.pad(x, (0, k - x.size(d)))`` with ``x.size(d)`` a length from tensor data (diffusers'
    Mochi pads its attention output back to the full sequence): the result's length ``k``
    is fixed, or follows the inputs' sizes, while the amount is known only while running.
    Written as one fill element appended, then a gather of ``min(range(k), n)``: positions
    past ``n`` read the fill, and no size from data is written into the graph."""
    b = ctx.b
    others = [a for i, a in enumerate(amounts) if i != at]
    if mode != "constant" or at % 2 == 0 or any(not isinstance(a, int) or a != 0 for a in others):
        raise ctx.unsupported("padding by an amount computed in the model: only one amount, after the "
                              "end of one axis, in constant mode")
    axis = x.rank - 1 - at // 2
    n = dim_value(b, x, axis)
    length = b.op("add", n, b.cast(amounts[at], DType.I64))
    known = length.known.reshape(()).item() if length.known is not None else None
    if known is None or any(is_data_symbol(s) for s in dim_symbols([known])):
        raise ctx.unsupported("padding by an amount computed in the model to a length that comes from "
                              "tensor data (pad to a length fixed by the model or by the inputs' sizes instead)")
    grown = pad(ctx, x, [0, 0] * (x.rank - 1 - axis) + [0, 1], mode, value)
    return b.op("gather", grown, b.op("min", b.op("range", i64(b, 0), length, i64(b, 1)), n), axis=axis)


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
    return _padded(ctx, "constant", value)


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


# -- pad_sequence --------------------------------------------------------------------
def sequence_options(ctx: LoweringContext) -> tuple[bool, Any, bool]:
    """``pad_sequence``'s (batch_first, padding_value, left) arguments (defaults: the
    batch axis second, zero padding, padding on the right)."""
    batch_first = ctx.bool("batch_first") if ctx.has("batch_first") else False
    value = ctx.optional("padding_value") if ctx.has("padding_value") else None
    side = str(ctx.const("padding_side")) if ctx.has("padding_side") and not ctx.is_none("padding_side") else "right"
    if side not in ("left", "right"):
        raise ctx.unsupported(f"pad_sequence with padding_side={side!r}")
    return batch_first, 0.0 if value is None else value, side == "left"


def pad_sequences(ctx: LoweringContext, seqs: Sequence[Value], batch_first: bool, value: Any, left: bool) -> Value:
    """Each sequence padded on its first axis to the longest, then all stacked on a new
    batch axis (first or second). Lengths must be known at export, or all the same."""
    if not seqs or any(s.rank == 0 for s in seqs):
        raise ctx.unsupported("pad_sequence of no sequences, or of 0-d tensors")
    lengths = [s.type.shape[0] for s in seqs]
    static = [n for n in lengths if isinstance(n, int)]
    if all(n == lengths[0] for n in lengths):
        extras = [0] * len(seqs)
    elif len(static) == len(seqs):
        extras = [max(static) - n for n in static]
    else:
        raise ctx.unsupported("pad_sequence of sequences whose different lengths are known at run time only")
    axis = 0 if batch_first else 1
    out = []
    for s, extra in zip(seqs, extras):
        if extra:
            s = pad(ctx, s, [0, 0] * (s.rank - 1) + ([extra, 0] if left else [0, extra]), "constant", value)
        out.append(ctx.b.op("unsqueeze", s, axes=(axis,)))
    return out[0] if len(out) == 1 else ctx.b.op("concat", *out, axis=axis)


@RULES.rule("aten::pad_sequence")
def pad_sequence(ctx: LoweringContext) -> Value:
    """``nn.utils.rnn.pad_sequence`` of a list built in the model (not a run-time list)."""
    seqs = ctx.raw("sequences")
    if not isinstance(seqs, (list, tuple)):
        raise ctx.unsupported("pad_sequence of a list computed at run time")
    batch_first, value, left = sequence_options(ctx)
    return pad_sequences(ctx, [ctx.as_value(s) for s in seqs], batch_first, value, left)
