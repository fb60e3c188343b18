"""Values the trace took from the example inputs' data, reported instead of swallowed.

``torch.jit.trace`` records tensor operations only: where ``forward`` turns a tensor
into a Python value (``if t.sum() > 0:``, ``.item()``, ``int(t)``, ``t.tolist()``,
``torch.tensor([t[0], t[1]])``), the value it had for the example inputs is baked into
the graph. When that value depends on the inputs' *data*, the artifact is specialised
to the example: other inputs may take another branch in PyTorch but not in the
artifact. Values computed only from sizes (static in an export without dynamic axes;
see ``BakedSizeWarning`` otherwise), from constants or from parameters and buffers
(the artifact holds them anyway) are not reported.

Each place becomes a :class:`SpecializedTraceWarning` naming the source line and the
module, or, with ``compile(..., strict=True)``, one :class:`SpecializedTraceError`
listing all of them.
"""

from __future__ import annotations

import linecache
import os
import warnings
from collections.abc import Sequence
from types import FrameType

import attrs
import torch

from t2n.errors import SpecializedTraceError
from t2n.frontend import torch_private
from t2n.frontend.value_walk import ValueWalk


class SpecializedTraceWarning(UserWarning):
    """The trace took a value from the example inputs' data: the artifact is specialised
    to them (see ``compile(..., strict=True)``)."""


SIZE_ONLY_KINDS = frozenset({
    "aten::size", "aten::sym_size", "aten::dim", "aten::numel", "aten::sym_numel", "aten::len",
    "prim::shape", "prim::device", "prim::dtype", "aten::is_floating_point",
})
"""Ops whose result depends on their input's shape or type, never its data."""

LIKE_KINDS = frozenset({
    "aten::zeros_like", "aten::ones_like", "aten::empty_like", "aten::full_like",
    "aten::rand_like", "aten::randn_like", "aten::randint_like", "aten::new_zeros",
    "aten::new_ones", "aten::new_empty", "aten::new_full", "aten::new_empty_strided",
})
"""Ops that take only the shape and type of their first input (the rest may be data)."""

OUTPUT_SOURCES: dict[tuple[str, int], tuple[int, ...]] = {
    ("aten::_pack_padded_sequence", 1): (1,),  # batch sizes: from the lengths only
}
"""(op, output) → the only inputs that output is computed from, where not all are."""

_TORCH_DIR = os.path.dirname(torch.__file__)
_T2N_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_WARNINGS = warnings.__file__


def data_inputs(v: torch._C.Value) -> list[torch._C.Value]:
    """The traced values whose data ``v`` is computed from: none through ops that only read
    sizes, not the size argument of ``*_like`` ops, only the sources of that output for
    multi-output ops (``OUTPUT_SOURCES``)."""
    node = v.node()
    kind = node.kind()
    if kind in SIZE_ONLY_KINDS:
        return []
    inputs = list(node.inputs())
    only = OUTPUT_SOURCES.get((kind, v.offset()))
    if only is not None:
        inputs = [inputs[i] for i in only]
    return inputs[1:] if kind in LIKE_KINDS else inputs


class InputDependence:
    """Whether a value of the graph being traced is computed from the data of the
    model's inputs (the first ``n_inputs`` graph inputs), not only from their sizes,
    from constants, or from parameters and buffers."""

    def __init__(self, n_inputs: int) -> None:
        self.n_inputs = n_inputs
        self._clean: set[int] = set()

    def __call__(self, value: torch._C.Value) -> bool:
        stack, seen = [value], set()
        while stack:
            v = stack.pop()
            u = v.unique()
            if u in seen or u in self._clean:
                continue
            seen.add(u)
            if v.node().kind() == "prim::Param":
                if v.offset() < self.n_inputs:
                    return True
                continue
            stack.extend(data_inputs(v))
        self._clean |= seen
        return False

    def of_tensor(self, t: object) -> bool:
        """For a tensor the tracer knows (anything else is a constant to it)."""
        value = torch_private.traced_value(t)
        return value is not None and self(value)


DATA_SIZING_KINDS = frozenset({"aten::nonzero", "aten::nonzero_numpy", "aten::argwhere", "aten::masked_select",
                               "aten::repeat_interleave", "aten::index", "aten::_unique2", "aten::unique_dim",
                               "aten::unique_consecutive"})
"""Ops whose output length can come from their inputs' data (``aten::index``: by a
boolean mask; ``repeat_interleave``: by computed repeats)."""


class DataSizedLength:
    """Whether a traced tensor's length may come from the model inputs' data: it is
    computed from the output of an op of ``DATA_SIZING_KINDS`` whose inputs follow the
    model's inputs. A Python number read from such a length (``len(t)``) is the example's:
    the tracer cannot record it, and ``InputDependence`` alone does not see it (sizes are
    not data to it)."""

    def __init__(self, dependence: InputDependence) -> None:
        self.dependence = dependence
        self._known: dict[int, bool] = {}
        self._no_length: set[int] = set()

    def reads_length(self, t: object) -> bool:
        """Whether the traced tensor ``t`` is computed from a size of such a tensor
        (``int(points.shape[0])``, a size the tracer turns into a tensor)."""
        value = torch_private.traced_value(t)
        stack, seen = ([value] if value is not None else []), set()
        while stack:
            v = stack.pop()
            if v.unique() in seen or v.unique() in self._no_length:
                continue
            seen.add(v.unique())
            node = v.node()
            if node.kind() in _SIZE_QUERIES:
                if self(node.inputsAt(0)):
                    return True
                continue
            stack.extend(node.inputs())
        self._no_length |= seen  # values already traced do not change: each is walked once
        return False

    def __call__(self, value: torch._C.Value) -> bool:
        stack, seen = [value], set()
        while stack:
            v = stack.pop()
            u = v.unique()
            if u in seen:
                continue
            if u in self._known:
                if self._known[u]:
                    return True
                continue
            seen.add(u)
            if any(self.dependence(src) for src in _count_sources(v.node())):
                return True
            stack.extend(i for i in v.node().inputs() if isinstance(i.type(), torch._C.TensorType))
        self._known.update(dict.fromkeys(seen, False))
        return False


def _count_sources(node: torch._C.Node) -> list[torch._C.Value]:
    """The inputs of a ``DATA_SIZING_KINDS`` node whose values set its output's length (a
    mask, computed repeats); none for other nodes."""
    kind = node.kind()
    if kind not in DATA_SIZING_KINDS:
        return []
    inputs = list(node.inputs())
    if kind == "aten::index":  # only a boolean mask selects a count from the data
        items = inputs[1].node()
        return [i for i in items.inputs() if isinstance(i.type(), torch._C.TensorType)
                and i.type().scalarType() in ("Bool", "Byte")] if items.kind() == "prim::ListConstruct" else []
    if kind in ("aten::masked_select", "aten::repeat_interleave") and len(inputs) > 1:
        return [inputs[1]] if isinstance(inputs[1].type(), torch._C.TensorType) else []
    return inputs[:1]


_SIZE_QUERIES = frozenset({"aten::size", "aten::sym_size", "prim::shape", "aten::numel", "aten::sym_numel",
                           "aten::len"})
"""Ops that read a tensor's sizes (not its rank, dtype or device)."""


def _constant_int(v: torch._C.Value) -> int | None:
    node = v.node()
    if node.kind() == "prim::Constant" and node.hasAttribute("value"):
        value = v.toIValue()
        return value if isinstance(value, int) else None
    return None


class SizeDependence:
    """Which model inputs' sizes a value of the graph being traced is computed from: a
    size taken from a tensor that follows an input (``x.shape[1] // 2``, the length of a
    conv's output). Each is ``(input index, axis)``, the axis ``None`` when not read
    directly from the input."""

    def __init__(self, n_inputs: int) -> None:
        self.n_inputs = n_inputs
        self._reach: dict[int, frozenset[int]] = {}

    def __call__(self, value: torch._C.Value) -> frozenset[tuple[int, int | None]]:
        found: set[tuple[int, int | None]] = set()
        walk = ValueWalk(value)
        for v in walk:
            node = v.node()
            if node.kind() in _SIZE_QUERIES:
                found |= self._read_sizes(node)
                continue
            if node.kind() == "prim::Param":
                continue
            walk.push(node.inputs())
        return frozenset(found)

    def _read_sizes(self, node: torch._C.Node) -> set[tuple[int, int | None]]:
        inputs = list(node.inputs())
        tensor = inputs[0]
        axis = _constant_int(inputs[1]) if node.kind() in ("aten::size", "aten::sym_size") and len(inputs) > 1 \
            else None
        if tensor.node().kind() == "prim::Param" and tensor.offset() < self.n_inputs:
            return {(tensor.offset(), axis)}
        return {(i, None) for i in self._inputs_reaching(tensor)}

    def _inputs_reaching(self, value: torch._C.Value) -> frozenset[int]:
        """The model inputs ``value`` is computed from (through data or sizes), remembered
        per value for the whole trace: a size read is judged at each norm layer's batch
        check (diffusers' UNets have dozens), and a fresh walk back through the graph
        traced so far for each made tracing quadratic (a minute for a tiny video UNet)."""
        memo = self._reach
        stack: list[tuple[torch._C.Value, bool]] = [(value, False)]
        while stack:
            v, inputs_done = stack.pop()
            u = v.unique()
            if u in memo:
                continue
            node = v.node()
            if node.kind() == "prim::Param":
                memo[u] = frozenset({v.offset()}) if v.offset() < self.n_inputs else frozenset()
                continue
            inputs = list(node.inputs())
            if inputs_done:
                memo[u] = frozenset().union(*(memo[i.unique()] for i in inputs))
            else:
                stack.append((v, True))
                stack.extend((i, False) for i in inputs if i.unique() not in memo)
        return memo[value.unique()]

    def of_tensor(self, t: object) -> frozenset[tuple[int, int | None]]:
        value = torch_private.traced_value(t)
        return self(value) if value is not None else frozenset()


def user_frame(frame: FrameType | None) -> FrameType | None:
    """The innermost frame of the model's own code (not torch, t2n, or transformers'
    decorators) on the stack from ``frame`` outwards."""
    while frame is not None:
        path = frame.f_code.co_filename
        if not path.startswith((_TORCH_DIR, _T2N_DIR, _WARNINGS)) and "/transformers/utils/" not in path \
                and not path.startswith("<"):
            return frame
        frame = frame.f_back
    return None


@attrs.frozen
class Specialization:
    """One place where the trace baked a value taken from the inputs' data (or, with
    ``sizes``, from the inputs' sizes: reported only for the dynamic axes among them)."""

    what: str
    """What was turned into a constant, e.g. "a tensor converted to a Python bool"."""
    filename: str
    lineno: int
    module: str = ""
    value: str = ""
    """The value the example inputs gave, when short (e.g. ``True``)."""
    sizes: frozenset[tuple[int, int | None]] = frozenset()
    """For a value computed from sizes: (input index, axis or None) it follows."""

    @property
    def where(self) -> str:
        if not self.filename:
            return "an unknown source line"
        code = linecache.getline(self.filename, self.lineno).strip()
        return f"{self.filename}:{self.lineno}" + (f" (`{code[:80]}`)" if code else "")

    def describe(self) -> str:
        mod = f"module '{self.module}'" if self.module else "the top-level module"
        took = f"; the example inputs gave {self.value}" if self.value else ""
        return f"{self.where}, in {mod}: {self.what}{took}"


ADVICE = (
    "The artifact is specialised to the example inputs: for other inputs PyTorch may "
    "compute something else (another branch, another number) while the artifact repeats "
    "what the example gave. What to do: compute it with tensor ops (torch.where, masks, "
    "clamp, tensor arithmetic instead of Python if/int/float/.item()/.tolist()), or, if "
    "the value never changes for your inputs, accept it (filter t2n.SpecializedTraceWarning); "
    "compile(..., strict=True) makes this an error."
)


def grouped(found: Sequence[Specialization]) -> dict[Specialization, int]:
    """Each place once (a loop or a repeated layer hits one line many times), with its
    count; the value is dropped when the occurrences disagree."""
    counts: dict[Specialization, int] = {}
    values: dict[Specialization, set[str]] = {}
    for s in found:
        key = attrs.evolve(s, value="")
        counts[key] = counts.get(key, 0) + 1
        values.setdefault(key, set()).add(s.value)
    out: dict[Specialization, int] = {}
    for key, n in counts.items():
        vals = values[key]
        out[attrs.evolve(key, value=vals.pop()) if len(vals) == 1 else key] = n
    return out


def report(found: Sequence[Specialization], *, strict: bool) -> list[str]:
    """Warn once per place (at the model's source line), or raise with every place at
    once when ``strict``. Returns the descriptions (kept in the IR's metadata)."""
    places = grouped(found)
    lines = [s.describe() + (f" ({n} times)" if n > 1 else "") for s, n in places.items()]
    if not lines:
        return []
    if strict:
        listing = "\n".join(f"  - {line}" for line in lines)
        raise SpecializedTraceError(
            f"{len(lines)} place(s) of the trace took values from the example inputs' data "
            f"(compile(..., strict=True)); nothing was written:\n{listing}\n{ADVICE}",
            lines,
        )
    for s, line in zip(places, lines):
        warnings.warn_explicit(
            f"{line}. {ADVICE}", SpecializedTraceWarning,
            s.filename or "<model>", s.lineno or 0,
        )
    return lines


__all__ = [
    "ADVICE", "DATA_SIZING_KINDS", "DataSizedLength", "InputDependence", "SizeDependence", "Specialization", "SpecializedTraceWarning",
    "grouped", "report", "user_frame",
]
