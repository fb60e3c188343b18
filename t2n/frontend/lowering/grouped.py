"""Histograms and grouped matrix products: what transformers' mixture-of-experts layers
call on CPU (``grouped_mm_experts_forward``: ``histc`` counts the tokens per expert,
``cumsum`` turns the counts into offsets, ``_grouped_mm`` runs each expert on its rows).

``histc`` follows PyTorch's CPU kernel, which bins by linear interpolation, not by
comparison with linspace's edges: bin ``trunc((x - lo) * bins / (hi - lo))`` (the last bin
takes ``hi``) in the input's dtype, counting only ``lo <= x <= hi`` (no NaN); the rule
finds that formula's thresholds at export and compares with them. A grouped product
multiplies the rows by every expert (one batched matmul over the constant weights, whose
size stays that of the weights) and selects each row's group; rows past the last offset,
which PyTorch leaves undefined, are zeros, as in transformers' fallback custom op.
"""

from __future__ import annotations

import math

import torch

from t2n.frontend.context import LoweringContext, host_array
from t2n.frontend.dtypes import to_torch
from t2n.frontend.helpers import dim_value, unsqueeze
from t2n.frontend.lowering.creation import index_range
from t2n.frontend.lowering.linalg import mm
from t2n.frontend.lowering.sort import count_below
from t2n.frontend.registry import RuleSet
from t2n.ir import DType, Value

RULES = RuleSet("grouped")


def _kernel_bins(x: torch.Tensor, left: torch.Tensor, width: torch.Tensor, bins: int) -> torch.Tensor:
    """The bin PyTorch's CPU kernel gives ``x`` (in range) before the last bin takes ``hi``:
    ``trunc((x - lo) * bins / (hi - lo))`` in ``x``'s dtype."""
    return torch.trunc((x - left) * torch.tensor(bins, dtype=x.dtype) / width)


_BITS = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32,
         torch.float64: torch.int64}


def _ordered(v: torch.Tensor) -> torch.Tensor:
    """Floats as int64 keys in the same order (and -0 as 0)."""
    bits = v.view(_BITS[v.dtype]).to(torch.int64)
    magnitude = bits & ((1 << (8 * v.element_size() - 1)) - 1)
    return torch.where(bits < 0, -magnitude, bits)


def _from_ordered(k: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    sign = -(1 << (8 * torch.tensor([], dtype=dtype).element_size() - 1))  # the sign bit, as a signed int
    bits = torch.where(k < 0, (-k) | sign, k)
    return bits.to(_BITS[dtype]).view(dtype)


def histc_thresholds(lo: float, hi: float, bins: int, dtype: torch.dtype) -> torch.Tensor:
    """For each bin j in 1 … bins-1, the least value of ``dtype`` the kernel puts in bin j
    or above. The kernel's bin never decreases as ``x`` grows (each rounded step is
    monotone), so an element's bin is how many of these are <= it: comparisons, which an
    engine cannot round differently (tract folds a division by a constant into a product,
    which moves values next to an edge). Found by bisection over the floats between the
    outer edges, where the bin goes from 0 to ``bins``."""
    edges = torch.linspace(lo, hi, bins + 1, dtype=dtype)
    left, width = edges[0], edges[-1] - edges[0]
    want = torch.arange(1, bins, dtype=torch.float64).to(dtype)
    below = _ordered(edges[:1]).expand(bins - 1)  # bin < j there
    above = _ordered(edges[-1:]).expand(bins - 1)  # bin >= j there
    while bool((above > below + 1).any()):
        mid = (below >> 1) + (above >> 1) + (below & above & 1)  # no overflow of f64 keys
        high = _kernel_bins(_from_ordered(mid, dtype), left, width, bins) >= want
        above, below = torch.where(high, mid, above), torch.where(high, below, mid)
    return _from_ordered(above, dtype)


@RULES.rule("aten::histc")
def histc(ctx: LoweringContext) -> Value:
    """Counts per bin (in the input's float dtype) of the elements in ``[min, max]``, NaN
    never counted. Bin j holds the elements between the j-th and (j+1)-th of the
    kernel's own thresholds (:func:`histc_thresholds`), not those of linspace's edges:
    PyTorch's CPU kernel interpolates, which puts some elements next to an edge in the
    neighbouring bin."""
    x = ctx.tensor(0)
    dtype = x.type.dtype
    if not dtype.is_float:
        raise ctx.unsupported(f"histc of {dtype.name} (PyTorch's CPU kernel takes floats only)")
    bins = ctx.int("bins") if ctx.has("bins") else 100
    lo = ctx.float("min") if ctx.has("min") else 0.0
    hi = ctx.float("max") if ctx.has("max") else 0.0
    if lo == hi:
        raise ctx.unsupported("histc with min == max (the range is then taken from the data)")
    if not (lo < hi and math.isfinite(lo) and math.isfinite(hi)) or bins < 1:
        raise ctx.unsupported(f"histc over [{lo}, {hi}] in {bins} bins")
    tdtype = to_torch(dtype)
    if tdtype not in _BITS:
        raise ctx.unsupported(f"histc of {dtype.name}")
    edges = torch.linspace(lo, hi, bins + 1, dtype=tdtype)
    thresholds = histc_thresholds(lo, hi, bins, tdtype)
    b = ctx.b

    def consts(values: torch.Tensor) -> Value:
        return b.const(host_array(values.to(torch.float64).numpy(), dtype), dtype)

    flat = b.op("reshape", x, b.ints([-1]))  # [N]
    valid = b.op("and", b.op("ge", flat, consts(edges[0])), b.op("le", flat, consts(edges[-1])))
    if bins == 1:
        return b.op("sum_reduce", b.cast(valid, dtype), axes=(0,), keepdims=True)
    group = count_below(ctx, consts(thresholds), flat, right=True)  # [N] i64
    ids = b.const(host_array(range(bins), DType.I64).reshape(1, bins), DType.I64)
    hit = b.op("and", unsqueeze(b, valid, [1]), b.op("eq", unsqueeze(b, group, [1]), ids))  # [N, bins]
    return b.op("sum_reduce", b.cast(hit, dtype), axes=(0,), keepdims=False)


@RULES.rule("aten::_grouped_mm", "transformers::grouped_mm_fallback")
def grouped_mm(ctx: LoweringContext) -> Value:
    """``input[S, K]`` by ``weight[E, K, N]`` with ``offs[E]``: row ``s`` uses the weights of
    group ``g(s)`` = how many offsets are <= ``s``. transformers' fallback op (what
    torch.export traces its MoE layers to) computes the same, with zeros past the last
    offset."""
    x = ctx.tensor(0)
    w = ctx.tensor(1)
    offs = ctx.optional_tensor("offs") if ctx.has("offs") else (ctx.optional_tensor(2) if ctx.n_inputs > 2 else None)
    if ctx.has("bias") and not ctx.is_none("bias"):
        raise ctx.unsupported("_grouped_mm with a bias")
    if offs is None or x.rank != 2 or w.rank != 3 or offs.rank != 1:
        raise ctx.unsupported(
            f"_grouped_mm of a {x.rank}-D input by a {w.rank}-D weight"
            f"{' without offsets' if offs is None else ''} (only 2-D input x 3-D weight with offsets is lowered)")
    out_dtype = ctx.dtype_arg("out_dtype") if ctx.has("out_dtype") else None
    b = ctx.b
    x, w = ctx.promoted(x, w)
    experts = w.type.shape[0]
    if not isinstance(experts, int):
        raise ctx.unsupported("_grouped_mm with a dynamic number of groups")
    per_group = mm(b, unsqueeze(b, x, [0]), w)  # [E, S, N]
    rows = index_range(b, dim_value(b, x, 0))  # [S]
    group = count_below(ctx, b.cast(offs, DType.I64), rows, right=True)  # [S]; E past the last offset
    ids = b.const(host_array(range(experts), DType.I64).reshape(experts, 1), DType.I64)
    pick = unsqueeze(b, b.op("eq", unsqueeze(b, group, [0]), ids), [2])  # [E, S, 1]
    zero = b.const(host_array(0, per_group.type.dtype), per_group.type.dtype)
    out = b.op("sum_reduce", b.op("select", pick, per_group, zero), axes=(0,), keepdims=False)
    return b.cast(out, out_dtype) if out_dtype is not None else out
