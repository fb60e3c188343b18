"""Loss functions, for models that return their loss at inference (evaluation graphs).
``reduction`` is PyTorch's enum: 0 none, 1 mean, 2 sum."""

from __future__ import annotations

from t2n.frontend.context import LoweringContext
from t2n.frontend.helpers import dim_value, i64, unsqueeze
from t2n.frontend.registry import RuleSet
from t2n.ir import DType, Value

RULES = RuleSet("losses")


def reduce_loss(ctx: LoweringContext, loss: Value, reduction: int) -> Value:
    if reduction == 0 or loss.rank == 0:
        return loss
    kind = "mean_reduce" if reduction == 1 else "sum_reduce"
    return ctx.b.op(kind, loss, axes=tuple(range(loss.rank)), keepdims=False)


def _pair(ctx: LoweringContext) -> tuple[Value, Value]:
    x, y = ctx.promoted(ctx.raw(0), ctx.raw(1))
    return x, y


@RULES.rule("aten::mse_loss", "aten::l1_loss")
def mse_l1(ctx: LoweringContext) -> Value:
    x, y = _pair(ctx)
    d = ctx.b.op("sub", x, y)
    loss = ctx.b.op("mul", d, d) if "mse" in ctx.kind else ctx.b.op("abs", d)
    return reduce_loss(ctx, loss, ctx.int(2))


@RULES.rule("aten::smooth_l1_loss", "aten::huber_loss")
def smooth_l1(ctx: LoweringContext) -> Value:
    x, y = _pair(ctx)
    b = ctx.b
    t = ctx.float(3) if ctx.n_inputs > 3 else 1.0
    d = b.op("abs", b.op("sub", x, y))
    dt = x.type.dtype
    half_sq = b.op("mul", ctx.as_value(0.5, dt), b.op("mul", d, d))
    if ctx.kind == "aten::huber_loss":
        small = b.op("le", d, ctx.as_value(t, dt))
        loss = b.op("select", small, half_sq, b.op("mul", ctx.as_value(t, dt), b.op("sub", d, ctx.as_value(0.5 * t, dt))))
    elif t == 0:
        loss = d
    else:
        small = b.op("lt", d, ctx.as_value(t, dt))
        loss = b.op("select", small, b.op("div", half_sq, ctx.as_value(t, dt)), b.op("sub", d, ctx.as_value(0.5 * t, dt)))
    return reduce_loss(ctx, loss, ctx.int(2))


def _weighted(ctx: LoweringContext, loss: Value, key: int) -> Value:
    w = ctx.optional_tensor(key, loss.type.dtype) if ctx.n_inputs > key else None
    return loss if w is None else ctx.b.op("mul", loss, w)


@RULES.rule("aten::binary_cross_entropy")
def bce(ctx: LoweringContext) -> Value:
    """-(y log x + (1 - y) log(1 - x)), each log clamped at -100 as PyTorch does."""
    x, y = _pair(ctx)
    b = ctx.b
    dt = x.type.dtype
    floor = ctx.as_value(-100.0, dt)
    one = ctx.as_value(1.0, dt)
    log_x = b.op("max", b.op("log", x), floor)
    log_1mx = b.op("max", b.op("log", b.op("sub", one, x)), floor)
    loss = b.op("neg", b.op("add", b.op("mul", y, log_x), b.op("mul", b.op("sub", one, y), log_1mx)))
    return reduce_loss(ctx, _weighted(ctx, loss, 2), ctx.int(3))


@RULES.rule("aten::binary_cross_entropy_with_logits")
def bce_logits(ctx: LoweringContext) -> Value:
    """(1 - y) x + w_pos (log(1 + exp(-|x|)) + max(-x, 0)), stable for any x."""
    x, y = _pair(ctx)
    b = ctx.b
    dt = x.type.dtype
    one, zero = ctx.as_value(1.0, dt), ctx.as_value(0.0, dt)
    soft = b.op("add", b.op("log1p", b.op("exp", b.op("neg", b.op("abs", x)))), b.op("max", b.op("neg", x), zero))
    pos = ctx.optional_tensor(3, dt) if ctx.n_inputs > 3 else None
    if pos is not None:
        soft = b.op("mul", soft, b.op("add", one, b.op("mul", b.op("sub", pos, one), y)))
    loss = b.op("add", b.op("mul", b.op("sub", one, y), x), soft)
    return reduce_loss(ctx, _weighted(ctx, loss, 2), ctx.int(4))


@RULES.rule("aten::kl_div")
def kl_div(ctx: LoweringContext) -> Value:
    x, y = _pair(ctx)
    b = ctx.b
    dt = x.type.dtype
    if ctx.n_inputs > 3 and ctx.bool(3):  # log_target
        loss = b.op("mul", b.op("exp", y), b.op("sub", y, x))
    else:
        zero = ctx.as_value(0.0, dt)
        safe = b.op("select", b.op("gt", y, zero), y, ctx.as_value(1.0, dt))
        loss = b.op("select", b.op("gt", y, zero), b.op("mul", y, b.op("sub", b.op("log", safe), x)), zero)
    return reduce_loss(ctx, loss, ctx.int(2))


def nll(ctx: LoweringContext, logp: Value, target: Value, reduction: int, ignore_index: int,
        smoothing: float = 0.0) -> Value:
    """Negative log-likelihood of class indices along axis 1, ignored targets excluded
    from the sum and from the mean's count."""
    b = ctx.b
    dt = logp.type.dtype
    c = dim_value(b, logp, 1)
    classes = b.op("range", i64(b, 0), c, i64(b, 1))
    shape = [1] * logp.rank
    shape[1] = -1
    classes = b.op("reshape", classes, b.ints(shape))
    t = unsqueeze(b, b.cast(target, DType.I64), [1])
    onehot = b.cast(b.op("eq", t, classes), dt)
    picked = b.op("sum_reduce", b.op("mul", logp, onehot), axes=(1,), keepdims=False)
    loss = b.op("neg", picked)
    if smoothing:
        uniform = b.op("neg", b.op("mean_reduce", logp, axes=(1,), keepdims=False))
        loss = b.op("add", b.op("mul", ctx.as_value(1.0 - smoothing, dt), loss),
                    b.op("mul", ctx.as_value(smoothing, dt), uniform))
    keep = b.op("ne", b.cast(target, DType.I64), i64(b, ignore_index))
    loss = b.op("select", keep, loss, ctx.as_value(0.0, dt))
    if reduction != 1:
        return reduce_loss(ctx, loss, reduction)
    total = b.op("sum_reduce", loss, axes=tuple(range(loss.rank)), keepdims=False)
    count = b.op("sum_reduce", b.cast(keep, dt), axes=tuple(range(keep.rank)), keepdims=False)
    return b.op("div", total, count)


@RULES.rule("aten::nll_loss", "aten::nll_loss_nd", "aten::nll_loss2d")
def nll_loss(ctx: LoweringContext) -> Value:
    logp, target = ctx.tensor(0), ctx.tensor(1)
    if ctx.n_inputs > 2 and not ctx.is_none(2):
        raise ctx.unsupported("class weights in nll_loss")
    if logp.rank == 1:
        logp, target = unsqueeze(ctx.b, logp, [0]), unsqueeze(ctx.b, target, [0])
    return nll(ctx, logp, target, ctx.int(3), ctx.int(4))


@RULES.rule("aten::cross_entropy_loss")
def cross_entropy(ctx: LoweringContext) -> Value:
    x, target = ctx.tensor(0), ctx.tensor(1)
    if ctx.n_inputs > 2 and not ctx.is_none(2):
        raise ctx.unsupported("class weights in cross_entropy")
    if target.type.dtype.is_float:
        raise ctx.unsupported("cross_entropy with class probabilities as targets")
    if x.rank == 1:
        x, target = unsqueeze(ctx.b, x, [0]), unsqueeze(ctx.b, target, [0])
    logp = ctx.b.op("log_softmax", x, axes=(1,))
    smoothing = ctx.float(5) if ctx.n_inputs > 5 else 0.0
    return nll(ctx, logp, target, ctx.int(3), ctx.int(4), smoothing)


