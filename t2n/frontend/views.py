"""Alias tracking, so that in-place ops on views (``pe[:, 0::2] = ...``) mutate their base.

``torch.jit.trace`` records a view op (slice, select, transpose, view…) and then an
in-place op on its output; later readers use the *base*'s original value. Lowering is
functional, so each write into a view is turned into a new base value built with the
view's inverse (slice scatter, inverse permutation, reshape back), and every other view
of that base is re-derived from the new base when it is next read.

The inverse is read off the IR ops the view's rule produced (a chain of single-input
ops from the base to the view), so every aten view kind whose rule lowers to ``slice``,
``squeeze``, ``unsqueeze``, ``reshape`` or ``transpose`` is invertible without a rule of
its own. A write through any other view kind is refused, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from t2n.frontend.complex_tensors import Complex
from t2n.frontend.context import UnsupportedHere
from t2n.frontend.helpers import transpose
from t2n.ir import Builder, Dim, Sym, Value
from t2n.ir.infer_utils import INT64_MAX, slice_dim

VIEW_KINDS = frozenset(
    "aten::" + k
    for k in ["slice", "select", "narrow", "transpose", "t", "permute", "unsqueeze", "squeeze", "view", "reshape", "_reshape_alias", "_unsafe_view", "flatten", "unflatten", "view_as", "reshape_as", "movedim", "moveaxis", "swapaxes", "swapdims", "alias", "detach", "contiguous", "expand", "expand_as", "diagonal", "numpy_T", "mT", "adjoint"]
)
"""aten ops whose output shares memory with their first input."""

MULTI_VIEW_KINDS = frozenset(
    "aten::" + k
    for k in ["chunk", "unsafe_chunk", "split", "unsafe_split", "split_with_sizes",
              "unsafe_split_with_sizes", "unbind", "tensor_split", "hsplit", "vsplit", "dsplit"]
)
"""aten ops whose list of outputs (unpacked by ``prim::ListUnpack``) are views of their
first input."""

MAYBE_COPY_KINDS = frozenset(
    "aten::" + k for k in ["reshape", "reshape_as", "flatten", "unflatten", "contiguous"]
)
"""aten ops that return a view only when the input's strides allow it (else a copy)."""

SELF_WHEN_SAME_KINDS = frozenset(["aten::to", "aten::type_as"])
"""aten ops that return their input itself (an alias) when nothing changes."""


def aliases_input(node: Any) -> bool:
    """Whether a reshape-like op shares memory with its input in PyTorch: replayed on
    meta tensors with the strides the trace recorded (unknown strides: assume a view)."""
    inp, out = next(iter(node.inputs())).type(), next(iter(node.outputs())).type()
    try:
        sizes, strides, out_sizes = inp.sizes(), inp.strides(), out.sizes()
    except RuntimeError:
        return True
    if sizes is None or strides is None or out_sizes is None:
        return True
    import torch

    t = torch.empty_strided(sizes, strides, device="meta")
    if node.kind() == "aten::contiguous":
        return t.is_contiguous()
    r = t.reshape(out_sizes)
    return r is t or r._base is t


@attrs.define
class View:
    base: int  # the jit value id of the tensor viewed
    rederive: Callable[[], Any]  # lowers the view op again from the current base
    version: int  # the base's version this view was derived from


class ViewTracker:
    """Which lowered values are views of which, and how many times each was written."""

    def __init__(self, env: dict[int, Any]) -> None:
        self.env = env
        self.views: dict[int, View] = {}
        self.versions: dict[int, int] = {}

    def record(self, view_id: int, base_id: int, rederive: Callable[[], Any]) -> None:
        self.refresh(base_id)
        self.views[view_id] = View(base_id, rederive, self.versions.get(base_id, 0))

    def refresh(self, vid: int) -> None:
        """Re-derive ``vid`` (and the views it is made from) if its base was written."""
        view = self.views.get(vid)
        if view is None:
            return
        self.refresh(view.base)
        current = self.versions.get(view.base, 0)
        if view.version != current:
            self.env[vid] = view.rederive()
            view.version = current
            # views of this view must be derived again too
            self.versions[vid] = self.versions.get(vid, 0) + 1

    def written(self, b: Builder, vid: int, old: Value | Complex, new: Value | Complex) -> None:
        """``vid`` (whose value was ``old``) now holds ``new``: propagate to its bases. A
        complex tensor's write goes through its (re, im) pair, which the views' ops act on."""
        self.env[vid] = new
        self.versions[vid] = self.versions.get(vid, 0) + 1
        view = self.views.get(vid)
        if view is None:
            return
        base_old = self.env[view.base]
        if isinstance(base_old, Complex) and isinstance(old, Complex) and isinstance(new, Complex):
            new_base: Value | Complex = Complex(write_through(b, base_old.pair, old.pair, new.pair))
        elif isinstance(base_old, Value) and isinstance(old, Value) and isinstance(new, Value):
            new_base = write_through(b, base_old, old, new)
        elif isinstance(base_old, (Value, Complex)):
            raise UnsupportedHere("a write into a real view of a complex tensor, or a complex view of a real one")
        else:
            return
        self.written(b, view.base, base_old, new_base)
        # derive the view again from its new base, so that a later write through it
        # still finds its chain of view ops back to the base
        self.env[vid] = view.rederive()
        view.version = self.versions.get(view.base, 0)


def view_chain(base: Value, view: Value) -> list[Any]:
    """The ops leading from ``base`` to ``view``, first to last (empty: the same value)."""
    chain = []
    v = view
    while v is not base:
        p = v.producer
        if p is None or not p.inputs or len(p.outputs) != 1:
            raise UnsupportedHere("a write into a view whose relation to its base is unknown")
        chain.append(p)
        v = p.inputs[0]
    return chain[::-1]


def write_through(b: Builder, base: Value, old_view: Value, new_view: Value) -> Value:
    """The base after writing ``new_view`` into the view ``old_view`` of ``base``."""
    new = new_view
    for op in reversed(view_chain(base, old_view)):
        new = invert(b, op, new)
    return new


def invert(b: Builder, op: Any, new_out: Value) -> Value:
    """The input of ``op`` once its output is replaced by ``new_out``."""
    x: Value = op.inputs[0]
    kind = op.kind
    if kind == "identity":
        return new_out
    if kind == "squeeze":
        return b.op("unsqueeze", new_out, axes=tuple(op.attrs["axes"]))
    if kind == "unsqueeze":
        return b.op("squeeze", new_out, axes=tuple(op.attrs["axes"]))
    if kind == "reshape":
        return b.op("reshape", new_out, b.op("shape_of", x))
    if kind == "transpose":
        perm = list(op.attrs["perm"])
        inverse = [perm.index(i) for i in range(len(perm))]
        return b.op("transpose", new_out, perm=tuple(inverse))
    if kind == "slice":
        begins, ends = _known(op.inputs[1]), _known(op.inputs[2])
        axes, steps = list(op.attrs["axes"]), list(op.attrs["steps"])
        if len(axes) != 1:
            raise UnsupportedHere("a write into a slice over several axes at once")
        return slice_scatter(b, x, new_out, axes[0], begins[0], ends[0], int(steps[0]))
    if kind == "gather" and _leading_range(op.inputs[1]):
        return _scatter_leading(b, x, op.inputs[1], new_out, int(op.attrs["axis"]))
    raise UnsupportedHere(f"a write into the result of '{kind}' (a view t2n cannot invert)")


def _leading_range(positions: Value) -> bool:
    """Whether ``positions`` is ``0, 1, ..., n - 1``: how ``t[:n]`` is lowered when ``n``
    is a length made from tensor data (the gather of that range, :func:`slice_`)."""
    p = positions.producer
    return (p is not None and p.kind == "range" and positions.rank == 1
            and all(v.known is not None and v.known.size == 1 and v.known.reshape(()).item() == k
                    for v, k in ((p.inputs[0], 0), (p.inputs[2], 1))))


def _scatter_leading(b: Builder, x: Value, positions: Value, new_out: Value, axis: int) -> Value:
    """``x`` with its first ``n`` entries along ``axis`` replaced by ``new_out`` (the
    length regulator's ``out[i, :len(r)] = r``): a scatter of whole slices, with ``axis``
    moved first, so that no op needs ``n`` (a length from tensor data) as a size."""
    perm = (axis, *(i for i in range(x.rank) if i != axis))
    back = tuple(perm.index(i) for i in range(x.rank))
    out = b.op("scatter_nd", transpose(b, x, perm), b.op("unsqueeze", positions, axes=(1,)),
               transpose(b, new_out, perm), reduction="none")
    return transpose(b, out, back)


def _known(v: Value) -> list[Dim]:
    if v.known is None:
        raise UnsupportedHere("a write into a slice with bounds computed at run time")
    return [d if isinstance(d, Sym) else int(d) for d in v.known.reshape(-1).tolist()]


def _slice(b: Builder, x: Value, axis: int, begin: Dim, end: Dim | None) -> Value:
    return b.op("slice", x, b.ints([begin]), b.ints([INT64_MAX if end is None else end]),
                axes=(axis,), steps=(1,))


def slice_scatter(b: Builder, base: Value, src: Value, axis: int, begin: Dim, end: Dim, step: int) -> Value:
    """``base`` with ``base[begin:end:step]`` along ``axis`` replaced by ``src`` (python-style
    bounds). Built from slices, reshapes and concatenation, so it runs in both engines
    and keeps other axes dynamic."""
    n = base.type.shape[axis]
    start, stop, length = slice_dim(n, begin, end, step)
    if isinstance(length, int) and length == 0:
        return base
    if list(src.type.shape) != _with_axis(base, axis, length):
        src = b.op("expand", src, b.ints(_with_axis(base, axis, length)))
    parts: list[Value] = []
    if not (isinstance(start, int) and start == 0):
        parts.append(_slice(b, base, axis, 0, start))
    if step == 1:
        parts.append(src)
        seg_end: Dim = stop
    else:
        if not all(isinstance(d, int) for d in (n, start, length)):
            raise UnsupportedHere("a write into a strided slice of a dynamic axis")
        assert isinstance(n, int) and isinstance(start, int) and isinstance(length, int)
        seg_end = start + length * step
        short = max(0, seg_end - n)
        seg = _slice(b, base, axis, start, min(seg_end, n))
        if short:
            pads = [(0, 0)] * base.rank
            pads[axis] = (0, short)
            seg = b.op("pad", seg, pads=tuple(pads), mode="constant", value=0.0)
        dims = list(seg.type.shape)
        grid = b.op("reshape", seg, b.ints(dims[:axis] + [length, step] + dims[axis + 1:]))
        rest = b.op("slice", grid, b.ints([1]), b.ints([INT64_MAX]), axes=(axis + 1,), steps=(1,))
        merged = b.op("concat", b.op("unsqueeze", src, axes=(axis + 1,)), rest, axis=axis + 1)
        flat = b.op("reshape", merged, b.ints(dims[:axis] + [length * step] + dims[axis + 1:]))
        if short:
            flat = _slice(b, flat, axis, 0, length * step - short)
            seg_end = n
        parts.append(flat)
    if not (isinstance(seg_end, int) and isinstance(n, int) and seg_end >= n) and not _same(seg_end, n):
        parts.append(_slice(b, base, axis, seg_end, None))
    return parts[0] if len(parts) == 1 else b.op("concat", *parts, axis=axis)


def _with_axis(x: Value, axis: int, size: Dim) -> list[Dim]:
    dims = list(x.type.shape)
    dims[axis] = size
    return dims


def _same(a: Dim, c: Dim) -> bool:
    return bool(a == c)  # ints and Syms compare by value and never raise
