"""Indexing, selection and writes by position on complex tensors (:class:`Complex`
pairs): rotary tables of torch.polar looked up by position ids, padded into a batch,
written row by row. ``COMPLEX_INDEX`` joins the complex rules that
:func:`t2n.frontend.lowering.complex.complex_rule` finds (filled complex tensors are
:mod:`t2n.frontend.lowering.creation`'s).

Each rule runs the real rule's own helper: on the (re, im) pair when the op only reads
or writes leading axes (advanced indexing, ``index_select``, ``embedding``,
``pad_sequence``, slice and select scatters), the pair's last axis riding along; on each
part when the indices have the complex tensor's shape rather than the pair's
(``gather``). Writes into views (``copy_``) are the lowering driver's alias tracking,
which follows the pairs.
"""

from __future__ import annotations

from typing import Any

from t2n.frontend.complex_tensors import (
    Complex,
    as_pair,
    complex_arg,
    from_parts,
    part,
    parts_dtype,
)
from t2n.frontend.context import LoweringContext, norm_axis
from t2n.frontend.lowering.index import advanced_index, gather_elements, select_indices
from t2n.frontend.lowering.pad import pad_sequences, sequence_options
from t2n.frontend.registry import RuleSet
from t2n.ir import DType

COMPLEX_INDEX = RuleSet("complex_index")


# -- gathers -------------------------------------------------------------------------

def _axes_taken(ctx: LoweringContext, item: Any) -> int:
    """How many axes one entry of an advanced index addresses (a mask: its rank)."""
    if item is None:
        return 1
    v = ctx.as_value(item)
    return v.rank if v.type.dtype in (DType.BOOL, DType.U8) else 1


@COMPLEX_INDEX.rule("aten::index", "aten::_unsafe_index")
def index(ctx: LoweringContext) -> Complex:
    """The real rule's advanced indexing on the pair (indices address leading axes only,
    so (re, im) stays last); a mask known only at run time is refused there."""
    z = complex_arg(ctx, 0)
    items = list(ctx.raw(1))
    if sum(_axes_taken(ctx, item) for item in items) > z.rank:
        raise ctx.unsupported(f"too many indices for a complex tensor of rank {z.rank}")
    return Complex(advanced_index(ctx, z.pair, items))


@COMPLEX_INDEX.rule("aten::index_select")
def index_select(ctx: LoweringContext) -> Complex:
    """The real rule's gather on the pair, the axis counted on the complex tensor."""
    z = complex_arg(ctx, 0)
    if z.rank == 0:
        return z
    return Complex(select_indices(ctx, z.pair, norm_axis(ctx.int(1), z.rank), ctx.tensor(2)))


@COMPLEX_INDEX.rule("aten::gather")
def gather(ctx: LoweringContext) -> Complex:
    """The real ``gather_elements`` on each part: the indices have the complex tensor's
    shape, not the pair's (Lumina's rotary table gathered per position)."""
    z = complex_arg(ctx, 0)
    if z.rank == 0:
        return z
    axis, idx, b = norm_axis(ctx.int(1), z.rank), ctx.tensor(2), ctx.b
    if idx.rank != z.rank:
        raise ctx.unsupported(f"{ctx.kind} of a complex tensor with indices of another rank")
    return from_parts(b, gather_elements(ctx, part(b, z, 0), axis, idx), gather_elements(ctx, part(b, z, 1), axis, idx))


@COMPLEX_INDEX.rule("aten::embedding")
def embedding(ctx: LoweringContext) -> Complex:
    """Rows of a complex weight: the real rule's gather on axis 0 of the pair."""
    return Complex(ctx.b.op("gather", complex_arg(ctx, 0).pair, ctx.tensor(1), axis=0))


@COMPLEX_INDEX.rule("aten::where")
def where(ctx: LoweringContext) -> Complex:
    """Both branches as pairs (torch.export writes an entry of a complex tensor as a
    ``where`` over a mask of positions), the condition given a unit (re, im) axis."""
    if ctx.n_inputs == 1:
        raise ctx.unsupported("where(condition) returns indices whose count depends on the data")
    b, cond = ctx.b, ctx.tensor(0)
    cond = cond if cond.type.dtype is DType.BOOL else b.cast(cond, DType.BOOL)
    dt = parts_dtype([ctx.raw(1), ctx.raw(2)])
    x, y = as_pair(ctx, ctx.raw(1), dt), as_pair(ctx, ctx.raw(2), dt)
    return Complex(b.op("select", b.op("unsqueeze", cond, axes=(cond.rank,)), x, y))


@COMPLEX_INDEX.rule("aten::pad_sequence")
def pad_sequence(ctx: LoweringContext) -> Complex:
    """The real rule's padding and stacking on the pairs (zero padding), or on each part
    (the padding value is real: the imaginary parts pad with zero)."""
    seqs = ctx.raw("sequences")
    if not isinstance(seqs, (list, tuple)):
        raise ctx.unsupported("pad_sequence of a list computed at run time")
    batch_first, value, left = sequence_options(ctx)
    dt = parts_dtype(list(seqs))
    zs = [Complex(as_pair(ctx, s, dt)) for s in seqs]
    if isinstance(value, complex) or not isinstance(value, (int, float)):
        raise ctx.unsupported("pad_sequence of complex tensors with a padding value other than a real number")
    if value == 0:
        return Complex(pad_sequences(ctx, [z.pair for z in zs], batch_first, 0.0, left))
    b = ctx.b
    re = pad_sequences(ctx, [part(b, z, 0) for z in zs], batch_first, value, left)
    return from_parts(b, re, pad_sequences(ctx, [part(b, z, 1) for z in zs], batch_first, 0.0, left))


# -- writes --------------------------------------------------------------------------

@COMPLEX_INDEX.rule("aten::copy_", "aten::copy")
def copy_(ctx: LoweringContext) -> Complex:
    """The source's pair in the destination's shape; the write into the destination (a
    view: Lumina's ``cap_freqs_cis[i, :n] = freqs_cis[i, :n]``) is the lowering's alias
    tracking, on the pairs."""
    dest = ctx.raw(0)
    if not isinstance(dest, Complex):
        raise ctx.unsupported("copy of a complex tensor into a real one (PyTorch drops the imaginary part)")
    src = as_pair(ctx, ctx.raw(1), dest.dtype)
    if list(src.type.shape) == list(dest.pair.type.shape):
        return Complex(src)
    return Complex(ctx.b.op("expand", src, ctx.b.op("shape_of", dest.pair)))


@COMPLEX_INDEX.rule("aten::slice_scatter", "aten::select_scatter")
def slice_scatter(ctx: LoweringContext) -> Complex:
    """torch.export's form of a write into a slice or an entry: the real scatter of the
    source's pair into the pair, the axis counted on the complex tensor."""
    from t2n.frontend.lowering.scatter import select_scatter_into, slice_scatter_into

    z = complex_arg(ctx, 0)
    src = as_pair(ctx, ctx.raw(1), z.dtype)
    if ctx.kind == "aten::select_scatter":
        return Complex(select_scatter_into(ctx, z.pair, src, norm_axis(ctx.int(2), z.rank)))
    return Complex(slice_scatter_into(ctx, z.pair, src, norm_axis(ctx.int(2), z.rank) if ctx.n_inputs > 2 else 0))
