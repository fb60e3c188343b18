"""Where a strided read lands: PyTorch's storage semantics for the ops that index memory
(``as_strided``), from the layouts the frontends recorded.

An IR value is the row-major array of its tensor's elements. A PyTorch tensor is a
window (sizes, strides, storage offset) onto a storage that views share: a transpose,
an expand, a slice with steps or a ``narrow`` of ``t`` reads ``t``'s memory in another
order. ``as_strided(x, size, stride, offset)`` indexes that memory, not ``x``'s elements
in row-major order. So the rule finds which element of which lowered value holds each
position it reads:

* ``x`` itself, when every position read lies under one of its own elements (a
  transposed or expanded input, windows that stay inside a slice): the strides the
  frontend recorded for ``x`` say where each of its elements lies;
* else the tensor that owns the storage: ``x``'s chain of view ops followed back to a
  value no view op made (an op's fresh result, a graph input, a weight), with ``x``'s
  place in it found by replaying the chain on meta tensors (TorchScript records sizes
  and strides but no storage offsets).

When neither is known (strides not recorded, a view op that cannot be replayed, a read
past everything the model holds) the caller refuses; it never guesses row-major.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs
import numpy as np
import torch

from t2n.frontend.context import LoweringContext, NotConstantError
from t2n.frontend.views import MULTI_VIEW_KINDS, SELF_WHEN_SAME_KINDS
from t2n.ir import Value


def strided_indices(sizes: Sequence[int], strides: Sequence[int], offset: int) -> np.ndarray:
    """The flat position that each element of ``as_strided(sizes, strides, offset)``
    reads: offset + Σ index_k · stride_k, as an i64 array of shape ``sizes``."""
    idx = np.full(list(sizes), offset, dtype=np.int64)
    for axis, (n, s) in enumerate(zip(sizes, strides, strict=True)):
        shape = [1] * len(sizes)
        shape[axis] = n
        idx = idx + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    return idx


@attrs.frozen
class Layout:
    """A tensor's place in its storage: sizes, strides and (when known) storage offset."""

    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int | None = None

    @property
    def numel(self) -> int:
        return int(np.prod(self.sizes, dtype=np.int64))

    @property
    def contiguous(self) -> bool:
        """Row-major: element ``i`` (in row-major order) lies at position ``i``."""
        expected = 1
        for n, s in zip(reversed(self.sizes), reversed(self.strides), strict=True):
            if n != 1 and s != expected:
                return False
            expected *= n
        return True

    def same_shape(self, sizes: Sequence[int], strides: Sequence[int]) -> bool:
        """The same sizes, and the same strides wherever a stride matters (size > 1)."""
        return (tuple(sizes) == self.sizes
                and all(n == 1 or a == b for n, a, b in zip(self.sizes, strides, self.strides, strict=True)))


def elements_at(layout: Layout, positions: np.ndarray) -> np.ndarray | None:
    """For each storage position (counted from ``layout``'s own first position), the
    row-major index of the element of ``layout``'s tensor stored there; None when some
    position is under none of its elements. Where elements overlap (an expand) any of
    them will do: they are the same memory."""
    if not positions.size:
        return positions.astype(np.int64)
    if layout.contiguous:
        ok = positions.min() >= 0 and positions.max() < layout.numel
        return positions.astype(np.int64) if ok else None
    where = strided_indices(layout.sizes, layout.strides, 0).reshape(-1)
    order = np.argsort(where, kind="stable")
    held = where[order]
    k = np.clip(np.searchsorted(held, positions), 0, max(held.size - 1, 0))
    if not held.size or not np.all(held[k] == positions):
        return None
    return order[k].astype(np.int64)


# -- the frontends' tensors ----------------------------------------------------------------
Replay = Callable[[torch.Tensor], Any]
"""The view op of a tensor run again on a meta tensor standing for its input."""


@attrs.frozen
class ViewOf:
    parent: Traced
    replay: Replay


OWNER = "owner"
"""The tensor owns its storage from its start (a fresh result, an input, a weight)."""


class Traced(Protocol):
    """A tensor of the frontend's graph, as the storage rules read it."""

    what: str
    """How it was made, for messages (``aten::transpose``, ``a graph input``)."""

    def layout(self) -> Layout | None: ...

    def lowered(self) -> Any: ...

    def symbolic_row_major(self) -> bool:
        """Without a static layout: known to be row-major from the start of its own
        storage anyway (an input of symbolic size, which the artifact receives so)."""

    def source(self) -> ViewOf | str | None:
        """The tensor it is a view of (and how), ``OWNER``, or None when unknown."""


def traced_input(ctx: LoweringContext, key: int | str = 0) -> Traced | None:
    """The frontend's tensor behind argument ``key`` of the node being lowered."""
    fx_node = getattr(ctx, "fx_node", None)
    if fx_node is not None:
        arg = fx_node.args[ctx.index(key)] if ctx.index(key) < len(fx_node.args) else None
        return FxTensor(ctx, arg) if isinstance(arg, torch.fx.Node) else None
    return JitTensor(ctx, ctx.torch_value(key))


def _layout_of(sizes: Any, strides: Any, offset: Any = None) -> Layout | None:
    if sizes is None or strides is None or len(sizes) != len(strides):
        return None
    items = [*sizes, *strides] + ([] if offset is None else [offset])
    if not all(isinstance(d, int) for d in items):
        return None
    return Layout(tuple(int(d) for d in sizes), tuple(int(d) for d in strides),
                  None if offset is None else int(offset))


_MEMORY_FORMATS = {0: torch.contiguous_format, 1: torch.preserve_format,
                   2: torch.channels_last, 3: torch.channels_last_3d}


class JitTensor:
    """A value of the TorchScript trace: sizes and strides from its recorded type."""

    def __init__(self, ctx: LoweringContext, value: torch._C.Value) -> None:
        self.ctx = ctx
        self.value = value
        kind = value.node().kind()
        self.what = {"prim::Param": "a graph input", "prim::Constant": "a constant",
                     "prim::GetAttr": "a module attribute"}.get(kind, kind)

    def layout(self) -> Layout | None:
        t = self.value.type()
        if not isinstance(t, torch._C.TensorType):
            return None
        try:
            return _layout_of(t.sizes(), t.strides())
        except RuntimeError:
            return None

    def lowered(self) -> Any:
        return self.ctx.lowering.env.get(self.value.unique())

    def symbolic_row_major(self) -> bool:
        return self.value.node().kind() == "prim::Param"

    def source(self) -> ViewOf | str | None:
        node = self.value.node()
        kind = node.kind()
        if kind in ("prim::Param", "prim::Constant", "prim::GetAttr"):
            return OWNER
        if kind == "prim::ListUnpack":
            return self._piece(node)
        try:
            schema = torch._C.parse_schema(node.schema())
        except RuntimeError:
            return None
        if not schema.returns:
            return None
        out = schema.returns[0].alias_info
        if out is None:
            return OWNER
        first = schema.arguments[0].alias_info if schema.arguments else None
        if first is None or not set(out.before_set) & set(first.before_set):
            return None
        parent = JitTensor(self.ctx, node.inputsAt(0))
        if out.is_write:  # in place: the output is its input
            return ViewOf(parent, lambda m: m)
        if kind in SELF_WHEN_SAME_KINDS:
            copies = (_dtype(node.output()) != _dtype(node.inputsAt(0))
                      or (self._has(schema, "copy") and bool(self._arg(node, schema, "copy"))))
            return OWNER if copies else ViewOf(parent, lambda m: m)
        return ViewOf(parent, lambda m: self._replay(node, schema, m))

    def _piece(self, unpack: torch._C.Node) -> ViewOf | None:
        i = list(unpack.outputs()).index(self.value)
        src = unpack.inputsAt(0).node()
        if src.kind() == "prim::ListConstruct":
            return ViewOf(JitTensor(self.ctx, src.inputsAt(i)), lambda m: m)
        if src.kind() in MULTI_VIEW_KINDS:
            schema = torch._C.parse_schema(src.schema())
            return ViewOf(JitTensor(self.ctx, src.inputsAt(0)), lambda m: self._replay(src, schema, m)[i])
        return None

    @staticmethod
    def _has(schema: Any, name: str) -> bool:
        return any(a.name == name for a in schema.arguments)

    def _arg(self, node: torch._C.Node, schema: Any, name: str) -> Any:
        i = [a.name for a in schema.arguments].index(name)
        return self.ctx.to_const(self.ctx.lowering.env.get(node.inputsAt(i).unique()), name)

    def _replay(self, node: torch._C.Node, schema: Any, meta: torch.Tensor) -> Any:
        op = getattr(getattr(torch.ops.aten, schema.name.split("::")[-1]), schema.overload_name or "default")
        args: list[Any] = [meta]
        kwargs: dict[str, Any] = {}
        for spec, v in zip(schema.arguments[1:], list(node.inputs())[1:], strict=False):
            vt = v.type()
            if isinstance(vt, torch._C.TensorType):
                sizes = vt.sizes()
                if sizes is None:
                    raise NotConstantError("an argument tensor of unknown size")
                c: Any = torch.empty(sizes, device="meta")
            else:
                c = self.ctx.to_const(self.ctx.lowering.env.get(v.unique()), spec.name)
                if str(spec.type) in ("MemoryFormat", "Optional[MemoryFormat]") and isinstance(c, int):
                    c = _MEMORY_FORMATS[c]
            if spec.kwarg_only:
                kwargs[spec.name] = c
            else:
                args.append(c)
        return op(*args, **kwargs)


def _dtype(v: torch._C.Value) -> Any:
    t = v.type()
    return t.scalarType() if isinstance(t, torch._C.TensorType) else None


class FxTensor:
    """A node of the ExportedProgram: layout and offset from its fake tensor."""

    def __init__(self, ctx: LoweringContext, node: torch.fx.Node) -> None:
        self.ctx = ctx
        self.node = node
        self.what = str(node.target) if node.op == "call_function" else "a graph input"

    def _val(self) -> Any:
        return self.node.meta.get("val")

    def layout(self) -> Layout | None:
        val = self._val()
        if not isinstance(val, torch.Tensor):
            return None
        return _layout_of(tuple(val.shape), val.stride(), val.storage_offset())

    def lowered(self) -> Any:
        return self.ctx.lowering.env.get(self.node)

    def symbolic_row_major(self) -> bool:
        if self.node.op == "placeholder":
            return True
        val = self._val()
        if not isinstance(val, torch.Tensor):
            return False
        from torch.fx.experimental.symbolic_shapes import guard_or_false

        try:
            return bool(guard_or_false(val.is_contiguous()) and guard_or_false(val.storage_offset() == 0))
        except Exception:  # a shape environment that cannot answer: not known
            return False

    def source(self) -> ViewOf | str | None:
        node = self.node
        if node.op != "call_function":
            return OWNER
        target = node.target
        if target is operator.getitem:
            src = node.args[0]
            i = node.args[1]
            if isinstance(src, torch.fx.Node) and getattr(src.target, "is_view", False):
                parent = src.args[0]
                if isinstance(parent, torch.fx.Node):
                    return ViewOf(FxTensor(self.ctx, parent), lambda m: _fx_replay(src, m)[i])
            return None
        schema = getattr(target, "_schema", None)
        if schema is None or not schema.returns:
            return None
        out = schema.returns[0].alias_info
        if out is None:
            return OWNER
        parent = node.args[0] if node.args else None
        if not isinstance(parent, torch.fx.Node):
            return None
        if out.is_write:
            return ViewOf(FxTensor(self.ctx, parent), lambda m: m)
        return ViewOf(FxTensor(self.ctx, parent), lambda m: _fx_replay(node, m))


def _fx_replay(node: torch.fx.Node, meta: torch.Tensor) -> Any:
    def arg(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            val = a.meta.get("val")
            if isinstance(val, torch.Tensor) and all(isinstance(d, int) for d in val.shape):
                return torch.empty(tuple(val.shape), device="meta")
            if isinstance(val, int):
                return val
            raise NotConstantError(f"argument {a.name} is computed in the model")
        if isinstance(a, (list, tuple)):
            return type(a)(arg(x) for x in a)
        if isinstance(a, torch.SymInt):
            raise NotConstantError("a symbolic size")
        return a

    target: Any = node.target
    return target(meta, *(arg(a) for a in node.args[1:]), **{k: arg(v) for k, v in node.kwargs.items()})


# -- reading the storage -------------------------------------------------------------------
@attrs.frozen
class StorageOwner:
    """The tensor that owns the storage a view reads, and where the view starts in it."""

    tensor: Traced
    layout: Layout
    view_offset: int


def _root(t: torch.Tensor) -> torch.Tensor:
    """The tensor whose memory ``t`` uses (itself unless it is a view)."""
    return t if t._base is None else t._base


def storage_owner(me: Traced) -> StorageOwner | str:
    """``me``'s storage owner (see the module docstring), or why it cannot be known."""
    chain: list[Traced] = [me]
    replays: list[Replay] = []
    while True:
        src = chain[-1].source()
        if src is None:
            return f"its input is made by {chain[-1].what}, whose output may share memory in a way t2n cannot follow"
        if isinstance(src, str):
            break
        chain.append(src.parent)
        replays.append(src.replay)
        if len(chain) > 10_000:
            return "its chain of views is too long to follow"
    owner = chain[-1]
    start = owner.layout()
    if start is None:
        return f"the strides of {owner.what} (the tensor it views) were not recorded"
    meta = torch.empty_strided(start.sizes, start.strides, device="meta")
    owner_layout = attrs.evolve(start, offset=0)
    for t, replay in zip(reversed(chain[:-1]), reversed(replays), strict=True):
        try:
            out = replay(meta)
        except (NotConstantError, RuntimeError, TypeError, ValueError, IndexError, AttributeError) as exc:
            return f"the view {t.what} cannot be replayed to find its place in memory ({exc})"
        if not isinstance(out, torch.Tensor):
            return f"the view {t.what} cannot be replayed to find its place in memory"
        if _root(out) is not _root(meta):  # a copy (a reshape that could not view)
            owner = t
            owner_layout = Layout(tuple(out.shape), tuple(out.stride()), 0)
        meta = out
    recorded = me.layout()
    if recorded is not None and not recorded.same_shape(tuple(meta.shape), tuple(meta.stride())):
        return (f"replaying its views gives strides {tuple(meta.stride())} where the trace recorded "
                f"{recorded.strides}")
    return StorageOwner(owner, owner_layout, int(meta.storage_offset()))


def storage_read(ctx: LoweringContext, x: Value, sizes: Sequence[int], strides: Sequence[int],
                 offset: int | None) -> tuple[Value, np.ndarray]:
    """The lowered value to gather from and the row-major element of it that each element
    of ``as_strided(x, sizes, strides, offset)`` reads (an i64 array of shape ``sizes``).
    ``offset`` None: from ``x``'s own storage offset, as PyTorch does. Raises the rule's
    refusal when the storage cannot be known."""
    reads = strided_indices(sizes, strides, 0)
    me = traced_input(ctx)
    mine = me.layout() if me is not None else None
    if me is None or mine is None:
        if me is None or me.symbolic_row_major():
            return _row_major(ctx, x, reads, offset or 0)
        raise _unknown(ctx, f"the strides of its input ({me.what}) were not recorded (a scripted "
                            "module, or sizes that are symbolic)",
                       "pass the nn.Module to be traced rather than a ScriptModule, or export "
                       "with static sizes, so that the strides are known")
    if x.type.shape.is_static and tuple(x.type.shape) != mine.sizes:
        raise _unknown(ctx, f"its input's recorded sizes {list(mine.sizes)} are not those of its "
                            f"value here {list(x.type.shape)}")
    own = _within_input(ctx, me, mine, x, reads, offset)
    return own if own is not None else _from_owner(ctx, me, reads, offset)


def _within_input(ctx: LoweringContext, me: Traced, mine: Layout, x: Value, reads: np.ndarray,
                  offset: int | None) -> tuple[Value, np.ndarray] | None:
    """The read from ``x``'s own elements, when each position read lies under one of them
    (None: some lies elsewhere in the storage, or where ``x`` starts is not known)."""
    start: int | None = 0
    if offset is not None:
        if mine.offset is not None:
            start = offset - mine.offset
        else:
            start = offset if me.source() == OWNER else None
    if start is None:
        return None
    if mine.contiguous and not x.type.shape.is_static:
        return _row_major(ctx, x, reads, start)
    idx = elements_at(mine, reads + start) if x.type.shape.is_static else None
    return (x, idx) if idx is not None else None


def _from_owner(ctx: LoweringContext, me: Traced, reads: np.ndarray,
                offset: int | None) -> tuple[Value, np.ndarray]:
    """The read from the tensor that owns the memory ``me`` views."""
    found = storage_owner(me)
    if isinstance(found, str):
        raise _unknown(ctx, found)
    base = found.tensor.lowered()
    if not isinstance(base, Value) or tuple(base.type.shape) != found.layout.sizes:
        raise _unknown(ctx, f"the tensor it views ({found.tensor.what}) has no value of its "
                            "recorded static shape here")
    first = found.view_offset if offset is None else offset
    idx = elements_at(found.layout, reads + first)
    if idx is None:
        raise ctx.unsupported(
            f"as_strided reads storage position {_first_missing(found.layout, reads + first)}, which "
            f"none of the {found.layout.numel} elements of the tensor that owns the memory "
            f"({found.tensor.what}) holds: PyTorch reads memory that no tensor of the model has there. "
            "What to do: keep the sizes, strides and offset within that tensor (or build the "
            "windows with unfold / slicing)")
    return base, idx


def _row_major(ctx: LoweringContext, x: Value, reads: np.ndarray, start: int) -> tuple[Value, np.ndarray]:
    """``x`` read as the row-major buffer it is in the artifact."""
    idx = reads + start
    total = x.type.shape.static_numel() if x.type.shape.is_static else None
    if idx.size and (idx.min() < 0 or (total is not None and int(idx.max()) >= total)):
        raise ctx.unsupported(f"as_strided reads element {int(idx.max())} of a tensor of {total} elements")
    return x, idx


def _first_missing(layout: Layout, positions: np.ndarray) -> int:
    """The first of ``positions`` that no element of ``layout``'s tensor holds."""
    held = set(strided_indices(layout.sizes, layout.strides, 0).reshape(-1).tolist())
    return next(int(p) for p in positions.reshape(-1).tolist() if p not in held)


def _unknown(ctx: LoweringContext, why: str,
             todo: str = "call .contiguous() on the input of as_strided (and take the strides "
                         "from the result), or build the windows with unfold / slicing") -> Exception:
    return ctx.unsupported(f"as_strided indexes the memory of its input, but where that memory "
                           f"lies cannot be known: {why}. What to do: {todo}")
