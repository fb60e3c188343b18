"""Compute a region of a reduced-precision graph in f32, with casts at its boundary only.

A *region* is a set of ops that together compute one thing whose rounding matters (an
attention's scores and softmax, a layer's accumulation, a normalization). The f32-forcing
passes find regions by pattern and hand them to :class:`F32Rewriter`, which:

- rebuilds every op of the region with f32 operands (its types re-inferred), so the
  region computes in f32 from its first op to its last;
- casts each f16 value read from outside the region up to f32 once (shared by every
  region of the pass that reads it). A value that is itself an f32 → f16 cast (the end of
  a neighbouring region, or a model's own ``.to(float16)``) is read at its f32 source
  instead, so adjacent regions share one boundary rather than cast down and up again;
- drops float casts inside the region (no cast pairs inside a region), turns small f16
  constants into f32 constants, and casts weights (``variable``) at run time, so the
  ``.dat`` files keep the model's type;
- casts each value read outside the region (or a graph output) back to its old type, under
  its old name.

Only regions that compute something in a reduced type (f16, or bf16 before ``bf16-as``)
are rewritten: an f32 graph passes through unchanged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import attrs
import numpy as np

from t2n.ir import ArrayData, DType, Graph, Op, Value

REDUCED: tuple[DType, ...] = (DType.F16, DType.BF16)
"""The float types a region is forced out of."""

LAYOUT_OPS = frozenset({"reshape", "transpose", "squeeze", "unsqueeze", "expand"})
"""Ops that move values without computing: a region may pass through them."""


@attrs.frozen
class Region:
    """Ops that compute one thing, and what the pattern that found them calls it."""

    ops: tuple[Op, ...]
    label: str


def is_float_cast(op: Op) -> bool:
    """A cast from a float type to a float type (a rounding, not a conversion)."""
    return op.kind == "cast" and op.inputs[0].type.dtype.is_float and op.output.type.dtype.is_float


def is_reduced(region: Region) -> bool:
    """Whether some op of the region computes a float result in a reduced type."""
    return any(v.type.dtype in REDUCED for op in region.ops if not is_float_cast(op) for v in op.outputs)


def input_dependent(graph: Graph) -> set[Value]:
    """The values computed from the graph's inputs; every other value is a constant of
    the model (a weight, a literal, or something computed from them only)."""
    dynamic: set[Value] = set(graph.inputs)
    for op in graph.ops():
        if any(v in dynamic for v in op.inputs) or (not op.inputs and op.kind not in ("const", "variable")):
            dynamic.update(op.outputs)
    return dynamic


def sole_user(graph: Graph, v: Value) -> Op | None:
    """The one op reading ``v``, if exactly one does and ``v`` is no graph output."""
    users = graph.users(v)
    return users[0] if len(users) == 1 and not graph.is_output(v) else None


def ordered(graph: Graph, ops: Iterable[Op]) -> tuple[Op, ...]:
    """``ops`` in the graph's topological order."""
    wanted = set(ops)
    return tuple(op for op in graph.ops() if op in wanted)


class F32Rewriter:
    """Rewrites regions of one graph to f32 (see the module docstring) and counts what
    it did: regions by label, casts inserted, boundaries shared with a neighbour."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.labels: Counter[str] = Counter()
        self.casts = 0
        self.shared = 0
        self._up: dict[Value, Value] = {}
        self._bypassed: list[Op] = []

    def rewrite(self, region: Region) -> None:
        """Compute ``region`` in f32, if it computes in a reduced type at all."""
        if not region.ops or not is_reduced(region):
            return
        members = set(region.ops)
        f32: dict[Value, Value] = {}
        for op in region.ops:
            inputs = [f32[v] if v in f32 else self.up(v) for v in op.inputs]
            if is_float_cast(op):
                f32[op.output] = inputs[0]
                continue
            new = self.graph.create_op(op.schema, inputs, op.attrs, loc=op.loc,
                                       names=[f"{v.name}_f32" for v in op.outputs])
            f32.update(zip(op.outputs, new.outputs))
        renames: list[tuple[Value, str]] = []
        for op in region.ops:
            for old in op.outputs:
                self._skip_cast_up(old, f32[old], members)
                outside = any(u not in members for u in self.graph.users(old)) or self.graph.is_output(old)
                if not outside:
                    continue
                new_v = f32[old]
                down = new_v if new_v.type.dtype is old.type.dtype else self._cast(new_v, old.type.dtype)
                self.graph.replace_all_uses_with(old, down)
                if down.producer is not None and down.producer.seq > op.seq:
                    renames.append((down, old.name))
        for op in reversed(region.ops):
            self.graph.remove(op)
        for v, name in renames:
            self.graph.rename(v, name)
        self.labels[region.label] += 1

    def _skip_cast_up(self, old: Value, f32: Value, members: set[Op]) -> None:
        """Readers outside the region that cast its output straight back to f32 (a
        neighbouring region rewritten earlier, or the model's own ``.float()``) read the
        f32 value instead."""
        if f32.type.dtype is not DType.F32 or old.type.dtype not in REDUCED:
            return
        for u in self.graph.users(old):
            if (u not in members and is_float_cast(u) and u.output.type.dtype is DType.F32
                    and not self.graph.is_output(u.output)):
                self.graph.replace_all_uses_with(u.output, f32)
                self.graph.remove(u)
                self.shared += 1

    def up(self, v: Value) -> Value:
        """``v`` as an f32 operand: itself unless it is a reduced float."""
        if v.type.dtype not in REDUCED:
            return v
        if v in self._up:
            return self._up[v]
        p = v.producer
        if p is not None and is_float_cast(p) and p.inputs[0].type.dtype is DType.F32:
            self.shared += 1
            self._bypassed.append(p)
            out = p.inputs[0]
        elif p is not None and p.kind == "const" and v.type.dtype is DType.F16 and isinstance(p.attrs["data"], ArrayData):
            arr = np.asarray(p.attrs["data"].array, dtype=np.float32)
            out = self.graph.create_op("const", [], {"data": ArrayData(arr, DType.F32)},
                                       names=[f"{v.name}_f32"], loc=p.loc).output
        else:
            out = self._cast(v, DType.F32)
        self._up[v] = out
        return out

    def _cast(self, v: Value, to: DType) -> Value:
        self.casts += 1
        loc = v.producer.loc if v.producer is not None else None
        return self.graph.create_op("cast", [v], {"to": to}, names=[f"{v.name}_{to.value}"], loc=loc).output

    def finish(self) -> None:
        """Remove the casts down that regions now read around (a later cleanup would too;
        doing it here keeps a pass run on its own tidy)."""
        for op in self._bypassed:
            if op in self.graph and not any(self.graph.users(v) or self.graph.is_output(v) for v in op.outputs):
                self.graph.remove(op)
        self._bypassed.clear()

    def summary(self, pass_name: str) -> str:
        """``force-norm-in-f32: 12 regions (layer_norm ×12), 24 casts``."""
        n = sum(self.labels.values())
        kinds = ", ".join(f"{label} ×{count}" for label, count in sorted(self.labels.items()))
        text = f"{pass_name}: {n} region{'s' if n != 1 else ''}"
        if kinds:
            text += f" ({kinds})"
        text += f", {self.casts} cast{'s' if self.casts != 1 else ''}"
        if self.shared:
            text += f", {self.shared} boundar{'ies' if self.shared != 1 else 'y'} shared"
        return text

    def stats(self) -> dict[str, int]:
        out = {"regions": sum(self.labels.values()), "casts": self.casts, "shared_boundaries": self.shared}
        out.update({f"regions.{label}": n for label, n in self.labels.items()})
        return out


def rewrite_regions(graph: Graph, regions: Sequence[Region]) -> F32Rewriter:
    """Rewrite each of ``regions`` (disjoint, in topological order) to f32."""
    rw = F32Rewriter(graph)
    for region in regions:
        rw.rewrite(region)
    rw.finish()
    return rw
