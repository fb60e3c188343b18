"""Khronos NNEF's emitters of the core family (the forms both targets share are in
:mod:`t2n.backends.nnef.emit.core`)."""

from __future__ import annotations

from t2n.backends.nnef.context import EmitContext, EmitterTable, Raw
from t2n.ir import DType, Op, Value

KHRONOS = EmitterTable("core/khronos")


@KHRONOS.emitter("cast")
def cast_khronos(ctx: EmitContext, op: Op) -> None:
    """Khronos types are scalar/integer/logical: casts within a family are copies, except
    to an 8/16-bit integer type that may not hold every value, which wraps as PyTorch does
    (in real arithmetic, exact below 2^24 in magnitude); a signed value cast to a 32/64-bit
    unsigned type is refused (its wrap has no exact real form)."""
    x = op.inputs[0]
    src, dst = x.type.dtype, op.attrs["to"]
    if dst.is_int and _may_not_fit(src, dst):
        if dst.bits >= 32:
            ctx.unsupported(f"a cast of {src} values to {dst}: PyTorch wraps negative values modulo "
                            f"2^{dst.bits}, which standard NNEF's integer type (no width) cannot "
                            "express; cast to a signed type, or export to TractNNEF")
            return
        _wrapped_khronos(ctx, op, x, dst)
    elif src.is_float == dst.is_float and (src is DType.BOOL) == (dst is DType.BOOL):
        ctx.emit(op.output, "copy", x)
    elif dst is DType.BOOL and src.is_float:
        ctx.emit(op.output, "ne", x, 0.0)
    elif dst is DType.BOOL:
        # Comparisons are defined on scalars only: compare the integers as reals.
        ctx.emit(op.output, "ne", Raw(ctx.emit("as_real", "cast<scalar>", x)), 0.0)
    elif src is DType.BOOL:
        ctx.emit(op.output, "select", x, 1.0 if dst.is_float else 1, 0.0 if dst.is_float else 0)
    else:
        ctx.emit(op.output, f"cast<{'scalar' if dst.is_float else 'integer'}>", x)


def _range(dtype: DType) -> tuple[int, int]:
    if dtype is DType.BOOL:
        return 0, 1
    if dtype.is_signed:
        return -(2 ** (dtype.bits - 1)), 2 ** (dtype.bits - 1) - 1
    return 0, 2 ** dtype.bits - 1


def _may_not_fit(src: DType, dst: DType) -> bool:
    """Whether a value of ``src`` may lie outside ``dst``'s range (32-bit signed targets
    are taken as wide: NNEF's integers hold them)."""
    if dst.is_signed and dst.bits >= 32:
        return False
    if src.is_float:
        return True
    lo, hi = _range(src)
    dlo, dhi = _range(dst)
    return lo < dlo or hi > dhi


def _wrapped_khronos(ctx: EmitContext, op: Op, x: Value, dst: DType) -> None:
    """``x`` truncated toward zero and wrapped into ``dst``'s range, computed on reals."""
    v = Raw(ctx.emit("as_real", "cast<scalar>", x)) if not x.type.dtype.is_float else Raw(ctx.arg(x))
    if x.type.dtype.is_float:
        down = ctx.emit("trunc_down", "floor", v)
        up = ctx.emit("trunc_up", "ceil", v)
        v = Raw(ctx.emit("truncated", "select", Raw(ctx.call("lt", v, 0.0)), Raw(up), Raw(down)))
    m = float(2 ** dst.bits)
    turns = ctx.emit("turns", "floor", Raw(ctx.call("div", v, m)))
    r = Raw(ctx.emit("wrapped", "sub", v, Raw(ctx.call("mul", Raw(turns), m))))
    if dst.is_signed:
        r = Raw(ctx.emit("wrapped_signed", "select", Raw(ctx.call("ge", r, m / 2)),
                         Raw(ctx.call("sub", r, m)), r))
    ctx.emit(op.output, "cast<integer>", r)
