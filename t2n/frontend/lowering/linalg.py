"""Matrix products: linear, matmul and its 2-D/batched forms, addmm, and the
contractions einsum expresses (tensordot, dot, inner, outer, bilinear), lowered to
transposes, reshapes and one batched matmul per pair of operands, so that both
targets run them; kron, matrix_power, cross and trace."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from t2n.frontend.context import LoweringContext, norm_axis
from t2n.frontend.helpers import squeeze, swap_last, transpose, unsqueeze
from t2n.frontend.lowering.index import take_diagonal
from t2n.frontend.lowering.shape import concat_shape, dims_of, shape_part
from t2n.frontend.registry import RuleSet
from t2n.ir import Builder, DType, Value

RULES = RuleSet("linalg")


def matmul(b: Builder, x: Value, y: Value, *, transpose_b: bool = False) -> Value:
    """torch.matmul semantics, including 1-D operands (promoted, then squeezed)."""
    squeeze_axes = []
    if x.rank == 1:
        x = unsqueeze(b, x, [0])
        squeeze_axes.append(-2)
    if y.rank == 1:
        y = unsqueeze(b, y, [1] if not transpose_b else [0])
        squeeze_axes.append(-1)
    if transpose_b and not x.type.dtype.is_float:
        y = swap_last(b, y)
        transpose_b = False
    out = mm(b, x, y, transpose_b=transpose_b)
    return squeeze(b, out, [a % out.rank for a in squeeze_axes])


def mm(b: Builder, x: Value, y: Value, *, transpose_b: bool = False) -> Value:
    """The IR matmul (rank >= 2 operands). tract has no integer matmul (it aborts:
    "Can't build a WeightType from I64"), so integers take the exact broadcast product
    [..., m, k, 1] * [..., 1, k, n] summed over k."""
    if x.type.dtype.is_float:
        return b.op("matmul", x, y, transpose_a=False, transpose_b=transpose_b)
    if transpose_b:
        y = swap_last(b, y)
    prod = b.op("mul", b.op("unsqueeze", x, axes=(x.rank,)), b.op("unsqueeze", y, axes=(y.rank - 2,)))
    return b.op("sum_reduce", prod, axes=(prod.rank - 2,), keepdims=False)


@RULES.rule("aten::matmul", "aten::mm", "aten::bmm")
def matmul_rule(ctx: LoweringContext) -> Value:
    x, y = ctx.promoted(ctx.raw(0), ctx.raw(1))
    return matmul(ctx.b, x, y)


@RULES.rule("aten::linear")
def linear(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    w = ctx.tensor(1, x.type.dtype)
    out = matmul(ctx.b, x, w, transpose_b=True)
    bias = ctx.optional_tensor(2, x.type.dtype)
    return ctx.b.op("add", out, bias) if bias is not None else out


@RULES.rule("aten::addmm", "aten::addbmm", "aten::baddbmm", "aten::addmv")
def addmm(ctx: LoweringContext) -> Value:
    bias, x, y = ctx.promoted(ctx.raw(0), ctx.raw(1), ctx.raw(2))
    prod = matmul(ctx.b, x, y)
    if ctx.kind == "aten::addbmm":
        prod = ctx.b.op("sum_reduce", prod, axes=(0,), keepdims=False)
    beta = ctx.const("beta") if ctx.has("beta") else 1
    alpha = ctx.const("alpha") if ctx.has("alpha") else 1
    dt = prod.type.dtype
    if alpha != 1:
        prod = ctx.b.op("mul", prod, ctx.as_value(alpha, dt))
    if beta == 0:
        return prod
    if beta != 1:
        bias = ctx.b.op("mul", bias, ctx.as_value(beta, dt))
    return ctx.b.op("add", bias, prod)


@RULES.rule("aten::mv")
def mv(ctx: LoweringContext) -> Value:
    x, v = ctx.promoted(ctx.raw(0), ctx.raw(1))
    return matmul(ctx.b, x, v)


# -- einsum and the products it covers ---------------------------------------------

Labels = list[str]


def parse_einsum(ctx: LoweringContext, equation: str, ranks: list[int]) -> tuple[list[Labels], Labels]:
    """Terms and output as label lists; ``...`` becomes labels of its own (``.0``,
    ``.1``…, aligned from the right as PyTorch broadcasts them)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ctx.unsupported(f"einsum '{equation}' names {len(terms)} operands, {len(ranks)} given")
    ell = max((rank - len(t.replace("...", "")) for t, rank in zip(terms, ranks) if "..." in t), default=0)
    ell_labels = [f".{i}" for i in range(ell)]

    def expand(term: str, rank: int | None) -> Labels:
        head, dots, tail = term.partition("...")
        if not dots:
            if rank is not None and len(term) != rank:
                raise ctx.unsupported(f"einsum term '{term}' for a tensor of rank {rank}")
            return list(term)
        n = ell if rank is None else rank - len(head) - len(tail)
        return [*head, *ell_labels[ell - n:], *tail]

    parsed = [expand(t, r) for t, r in zip(terms, ranks)]
    if arrow:
        out = expand(rhs, None)
    else:
        counts: dict[str, int] = {}
        for t in parsed:
            for lab in t:
                counts[lab] = counts.get(lab, 0) + 1
        out = ell_labels + sorted(lab for lab, c in counts.items() if c == 1 and not lab.startswith("."))
    return parsed, out


def _size(v: Value, axis: int) -> object:
    return v.type.shape[axis]


def _group(b: Builder, x: Value, axes: Sequence[int]) -> Value:
    """The product of ``x.shape[axes]`` as a 1-element i64 tensor."""
    if not axes:
        return b.ints([1])
    return b.op("prod_reduce", dims_of(b, x, axes), axes=(0,), keepdims=True)


def diagonal_labels(ctx: LoweringContext, x: Value, labels: Labels) -> tuple[Value, Labels]:
    """A label repeated in one term takes the diagonal: the two axes go last and merge,
    and every (n+1)-th element is the diagonal (the size must be static)."""
    b = ctx.b
    while len(set(labels)) != len(labels):
        lab = next(lab for lab in labels if labels.count(lab) > 1)
        p, q = [i for i, lb in enumerate(labels) if lb == lab][:2]
        n = x.type.shape[p]
        if not isinstance(n, int):
            raise ctx.unsupported(f"einsum diagonal over the symbolic size {n}")
        rest = [i for i in range(x.rank) if i not in (p, q)]
        x = transpose(b, x, [*rest, p, q])
        x = b.op("reshape", x, concat_shape(b, [dims_of(b, x, list(range(len(rest)))) if rest else None, [n * n]]))
        # A gather, not a stride n+1 slice: tract's optimizer fails to move that
        # downsample across the reshape ("Invalid axis").
        x = b.op("gather", x, b.const(np.arange(n, dtype=np.int64) * (n + 1), DType.I64), axis=len(rest))
        labels = [labels[i] for i in rest] + [lab]
    return x, labels


def sum_out(b: Builder, x: Value, labels: Labels, keep: set[str]) -> tuple[Value, Labels]:
    axes = [i for i, lab in enumerate(labels) if lab not in keep]
    if not axes:
        return x, labels
    return (b.op("sum_reduce", x, axes=tuple(axes), keepdims=False),
            [lab for lab in labels if lab in keep])


def _shape(b: Builder, parts: list[Value | list[int] | None]) -> Value:
    return concat_shape(b, parts) if any(p is not None and p != [] for p in parts) else b.ints([])


def contract(b: Builder, x: Value, xl: Labels, y: Value, yl: Labels, keep: set[str]) -> tuple[Value, Labels]:
    """Two operands as one batched matmul [batch, left, k] @ [batch, k, right]; labels in
    ``keep`` are needed later (by the output or other operands)."""
    x, xl = sum_out(b, x, xl, keep | set(yl))
    y, yl = sum_out(b, y, yl, keep | set(xl))
    batch = [lab for lab in xl if lab in yl and lab in keep]
    inner = [lab for lab in xl if lab in yl and lab not in keep]
    left = [lab for lab in xl if lab not in yl]
    right = [lab for lab in yl if lab not in xl]
    for lab in inner:
        # A contracted axis broadcast from size 1 on one side: sum the other side first.
        sx, sy = _size(x, xl.index(lab)), _size(y, yl.index(lab))
        if sx == 1 and sy != 1:
            y = b.op("sum_reduce", y, axes=(yl.index(lab),), keepdims=True)
        elif sy == 1 and sx != 1:
            x = b.op("sum_reduce", x, axes=(xl.index(lab),), keepdims=True)
    nb, nl, nk = len(batch), len(left), len(inner)
    x = transpose(b, x, [xl.index(lab) for lab in batch + left + inner])
    y = transpose(b, y, [yl.index(lab) for lab in batch + inner + right])
    left_dims = dims_of(b, x, list(range(nb, nb + nl))) if nl else None
    right_dims = dims_of(b, y, list(range(nb + nk, y.rank))) if right else None
    if nl != 1 or nk != 1:
        x = b.op("reshape", x, _shape(b, [shape_part(b, x, 0, nb), _group(b, x, range(nb, nb + nl)),
                                          _group(b, x, range(nb + nl, x.rank))]))
    if nk != 1 or len(right) != 1:
        y = b.op("reshape", y, _shape(b, [shape_part(b, y, 0, nb), _group(b, y, range(nb, nb + nk)),
                                          _group(b, y, range(nb + nk, y.rank))]))
    out = mm(b, x, y)
    if nl != 1 or len(right) != 1:
        out = b.op("reshape", out, _shape(b, [shape_part(b, out, 0, nb), left_dims, right_dims]))
    return out, batch + left + right


def einsum_labels(ctx: LoweringContext, operands: list[Value], terms: list[Labels], out: Labels) -> Value:
    """Contract labelled operands left to right into the ``out`` labels."""
    b = ctx.b
    if len(set(out)) != len(out):
        raise ctx.unsupported("einsum output repeats a label")
    ops = []
    for x, labels in zip(operands, terms):
        ops.append(diagonal_labels(ctx, x, list(labels)))
    acc, acc_l = ops[0]
    for i in range(1, len(ops)):
        keep = set(out).union(*(set(t) for _, t in ops[i + 1:]))
        acc, acc_l = contract(b, acc, acc_l, ops[i][0], ops[i][1], keep)
    acc, acc_l = sum_out(b, acc, acc_l, set(out))
    missing = [lab for lab in out if lab not in acc_l]
    if missing:
        raise ctx.unsupported(f"einsum output labels {missing} appear in no operand")
    return transpose(b, acc, [acc_l.index(lab) for lab in out])


@RULES.rule("aten::einsum")
def einsum(ctx: LoweringContext) -> Value:
    equation = str(ctx.const(0))
    items = ctx.raw(1)
    if not isinstance(items, (list, tuple)):
        raise ctx.unsupported("einsum over a tensor list computed at run time")
    operands = ctx.promoted(*items)
    terms, out = parse_einsum(ctx, equation, [x.rank for x in operands])
    return einsum_labels(ctx, operands, terms, out)


@RULES.rule("aten::tensordot")
def tensordot(ctx: LoweringContext) -> Value:
    x, y = ctx.promoted(ctx.raw(0), ctx.raw(1))
    dx = [norm_axis(d, x.rank) for d in ctx.ints(2)]
    dy = [norm_axis(d, y.rank) for d in ctx.ints(3)]
    if len(dx) != len(dy):
        raise ctx.unsupported("tensordot: the two dims lists differ in length")
    xl = [f"a{i}" for i in range(x.rank)]
    yl = [f"b{i}" for i in range(y.rank)]
    for i, j in zip(dx, dy):
        yl[j] = xl[i]
    out = [xl[i] for i in range(x.rank) if i not in dx] + [yl[j] for j in range(y.rank) if j not in dy]
    return einsum_labels(ctx, [x, y], [xl, yl], out)


@RULES.rule("aten::outer", "aten::ger")
def outer(ctx: LoweringContext) -> Value:
    x, y = ctx.promoted(ctx.raw(0), ctx.raw(1))
    return ctx.b.op("mul", ctx.b.op("unsqueeze", x, axes=(1,)), y)


@RULES.rule("aten::dot", "aten::vdot")
def dot(ctx: LoweringContext) -> Value:
    """Real tensors: vdot's conjugate changes nothing."""
    x, y = ctx.promoted(ctx.raw(0), ctx.raw(1))
    return einsum_labels(ctx, [x, y], [["i"], ["i"]], [])


@RULES.rule("aten::inner")
def inner(ctx: LoweringContext) -> Value:
    x, y = ctx.promoted(ctx.raw(0), ctx.raw(1))
    if x.rank == 0 or y.rank == 0:
        return ctx.b.op("mul", x, y)
    xl = [f"a{i}" for i in range(x.rank - 1)] + ["k"]
    yl = [f"b{i}" for i in range(y.rank - 1)] + ["k"]
    return einsum_labels(ctx, [x, y], [xl, yl], xl[:-1] + yl[:-1])


@RULES.rule("aten::bilinear")
def bilinear(ctx: LoweringContext) -> Value:
    """y[..., o] = x1[..., i] · W[o, i, j] · x2[..., j] + bias[o]."""
    x1 = ctx.tensor(0)
    dt = x1.type.dtype
    x2, w = ctx.tensor(1, dt), ctx.tensor(2, dt)
    lead = [f".{i}" for i in range(x1.rank - 1)]
    out = einsum_labels(ctx, [x1, w, x2], [[*lead, "i"], ["o", "i", "j"], [*lead, "j"]], [*lead, "o"])
    bias = ctx.optional_tensor(3, dt)
    return ctx.b.op("add", out, bias) if bias is not None else out


@RULES.rule("aten::kron")
def kron(ctx: LoweringContext) -> Value:
    """Interleave the axes of x and y, multiply, then merge each pair:
    [a0, 1, a1, 1] * [1, b0, 1, b1] → [a0·b0, a1·b1]."""
    x, y = ctx.promoted(ctx.raw(0), ctx.raw(1))
    b = ctx.b
    rank = max(x.rank, y.rank)
    x = unsqueeze(b, x, list(range(rank - x.rank)))
    y = unsqueeze(b, y, list(range(rank - y.rank)))
    prod = b.op("mul", b.op("unsqueeze", x, axes=tuple(range(1, 2 * rank, 2))),
                b.op("unsqueeze", y, axes=tuple(range(0, 2 * rank, 2))))
    sizes = b.op("mul", b.op("shape_of", x), b.op("shape_of", y))
    return b.op("reshape", prod, sizes)


@RULES.rule("aten::linalg_matrix_power", "aten::matrix_power")
def matrix_power(ctx: LoweringContext) -> Value:
    """Repeated squaring for a constant n >= 1; n = 0 is the identity."""
    x = ctx.tensor(0)
    n = ctx.int(1)
    b = ctx.b
    if n < 0:
        raise ctx.unsupported("matrix_power with a negative exponent (a matrix inverse)")
    if n == 0:
        size = x.type.shape[-1]
        if not isinstance(size, int):
            raise ctx.unsupported("matrix_power(x, 0) of a symbolic size")
        eye = b.const(np.eye(size, dtype=x.type.dtype.numpy), x.type.dtype)
        return b.op("expand", eye, b.op("shape_of", x))
    result: Value | None = None
    base = x
    while n:
        if n & 1:
            result = base if result is None else mm(b, result, base)
        n >>= 1
        if n:
            base = mm(b, base, base)
    assert result is not None
    return result


@RULES.rule("aten::linalg_cross", "aten::cross")
def cross(ctx: LoweringContext) -> Value:
    """c = a[i+1]·b[i+2] - a[i+2]·b[i+1] (indices mod 3) along ``dim``, as gathers."""
    x, y = ctx.promoted(ctx.raw(0), ctx.raw(1))
    b = ctx.b
    rank = max(x.rank, y.rank)
    if ctx.has("dim") and not ctx.is_none("dim"):
        axis = norm_axis(ctx.int("dim"), rank)
    elif ctx.kind == "aten::cross":
        # torch.cross without dim: the first axis of size 3 (deprecated, still honoured).
        axis = next((i for i, d in enumerate(x.type.shape) if d == 3), -1)
        if axis < 0:
            raise ctx.unsupported("cross: no axis of size 3")
    else:
        axis = rank - 1
    x = unsqueeze(b, x, list(range(rank - x.rank)))
    y = unsqueeze(b, y, list(range(rank - y.rank)))

    def take(v: Value, idx: list[int]) -> Value:
        return b.op("gather", v, b.const(np.asarray(idx, dtype=np.int64), DType.I64), axis=axis)

    one, two = [1, 2, 0], [2, 0, 1]
    return b.op("sub", b.op("mul", take(x, one), take(y, two)), b.op("mul", take(x, two), take(y, one)))


@RULES.rule("aten::trace")
def trace(ctx: LoweringContext) -> Value:
    x = ctx.tensor(0)
    d = take_diagonal(ctx, x, 0, 0, 1)
    if not x.type.dtype.is_float:
        d = ctx.b.cast(d, DType.I64)
    return ctx.b.op("sum_reduce", d, axes=(0,), keepdims=False)


@RULES.rule("aten::linalg_solve_triangular")
def solve_triangular(ctx: LoweringContext) -> Value:
    """``X`` with ``A X = B`` (``X A = B`` when not ``left``) for a triangular ``A`` of a
    constant size ``n``: ``A = D (I + N)`` with ``D`` its diagonal (``I`` when
    ``unitriangular``) and ``N`` strictly triangular, so nilpotent, and
    ``(I + N)⁻¹ = (I - N)(I + N²)(I + N⁴)…`` up to ``N^(2^m) = 0`` (``2^m >= n``): ``2 log₂ n``
    matrix products instead of ``n`` dependent steps of substitution, which the engine
    runs as a few batched products (gated delta-rule attention solves 64 x 64 systems per
    chunk)."""
    a, rhs = ctx.promoted(ctx.raw(0), ctx.raw(1))
    upper = ctx.bool("upper") if ctx.has("upper") else ctx.bool(2)
    left = ctx.bool("left") if ctx.has("left") else True
    unit = ctx.bool("unitriangular") if ctx.has("unitriangular") else False
    n = a.type.shape[-1]
    if not isinstance(n, int):
        raise ctx.unsupported("linalg_solve_triangular of a matrix whose size is symbolic")
    if not a.type.dtype.is_float:
        raise ctx.unsupported(f"linalg_solve_triangular of {a.type.dtype} matrices")
    b, dt = ctx.b, a.type.dtype.numpy
    strict = np.triu(np.ones((n, n), dt), 1) if upper else np.tril(np.ones((n, n), dt), -1)
    part = b.op("mul", a, b.const(strict, a.type.dtype))
    diagonal = None
    if not unit:  # rows scaled by the diagonal: A = D (I + D⁻¹ N)
        diagonal = b.op("sum_reduce", b.op("mul", a, b.const(np.eye(n, dtype=dt), a.type.dtype)),
                        axes=(a.rank - 1,), keepdims=True)  # [.., n, 1]
        part = b.op("div", part, diagonal)
    eye = b.const(np.eye(n, dtype=dt), a.type.dtype)
    inverse = b.op("sub", eye, part)
    power, reach = part, 2
    while reach < n:
        power = mm(b, power, power)
        inverse = mm(b, inverse, b.op("add", eye, power))
        reach *= 2
    if diagonal is not None:  # (I + D⁻¹ N)⁻¹ D⁻¹: column j divided by the j-th diagonal entry
        inverse = b.op("div", inverse, swap_last(b, diagonal))
    return mm(b, inverse, rhs) if left else mm(b, rhs, inverse)
