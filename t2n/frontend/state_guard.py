"""A ``forward`` that writes its own parameters or buffers, exported as PyTorch ran it.

Tracing runs ``forward`` once, on the model's real tensors: a write such as
``self.weight.mul_(2)`` or ``self.steps += 1`` changes them, and the trace also records
the write as an op. Exporting the changed memory *and* the op would apply the write
twice. So, while tracing, :class:`StateWrites` copies each parameter or buffer just
before the first write into its memory (only those, once), and after the trace:

* a tensor whose writes the trace recorded (its version counter moved) starts from
  that copy, the value PyTorch started from, and the recorded ops replay the writes:
  the artifact computes what PyTorch computed on the traced call, for any input;
* a tensor written where the trace cannot see (through ``.data``): its memory after
  the call is what every read in the trace saw, unless the trace read it before the
  write, which is refused;
* a tensor whose version moved with no write seen (inside a kernel, e.g. batch norm in
  training mode on its running statistics) is refused, naming it and the ops.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs
import torch

from t2n.errors import StateMutationError
from t2n.frontend import torch_private
from t2n.frontend.context import source_of
from t2n.frontend.specialization import InputDependence, Specialization, user_frame
from t2n.frontend.weight_guard import unchanged_check


class Watch(Protocol):
    """What the state guard reads of the trace's watch (:class:`t2n.frontend.trace_watch.TraceWatch`)."""

    dependence: InputDependence
    found: list[Specialization]

    def current_module(self) -> str: ...



def storage_key(t: torch.Tensor) -> int | None:
    """The address of the memory a tensor lives in (shared by its views), None where
    there is none (meta tensors, empty tensors)."""
    if t.is_meta or t.device.type != "cpu":
        return None
    ptr = t.untyped_storage().data_ptr()
    return ptr or None


@attrs.define
class WriteEvent:
    """One write into a parameter's or buffer's memory, seen while tracing."""

    name: str
    op: str
    filename: str
    lineno: int
    module: str
    version_before: int
    read_before: bool
    """The trace had already read the tensor when this write happened."""
    tracked: bool = True
    """The version counter moved: the trace recorded the write as an op."""

    @property
    def where(self) -> str:
        mod = f"module '{self.module}'" if self.module else "the top-level module"
        line = f"{self.filename}:{self.lineno}" if self.filename else "an unknown source line"
        return f"`{self.op}` at {line}, in {mod}"


class StateWrites:
    """The model's parameters and buffers, watched for writes while tracing."""

    def __init__(self, state: Sequence[tuple[str, torch.Tensor]]) -> None:
        self.state = list(state)
        self.versions = {id(t): t._version for _, t in self.state}
        self.by_storage: dict[int, list[tuple[str, torch.Tensor]]] = {}
        for name, t in self.state:
            key = storage_key(t)
            if key is not None:
                self.by_storage.setdefault(key, []).append((name, t))
        self.snapshots: dict[str, torch.Tensor] = {}
        self.events: list[WriteEvent] = []
        self.unchanged = {id(t): unchanged_check(t) for _, t in self.state}
        """Version counter and sampled contents: kernels that write a tensor without
        moving its counter (batch norm's running statistics) still show."""
        self.silent: list[str] = []
        """After :meth:`resolve`: the tensors such a kernel changed (exported at their value
        after the call, which no replay of the graph can start from)."""

    def before_write(self, target: torch.Tensor, op: str, watch: Watch) -> list[WriteEvent]:
        """Called just before ``op`` writes into ``target``: copies the state tensors it
        aliases (the first time) and notes the write."""
        key = storage_key(target)
        owners = self.by_storage.get(key) if key is not None else None
        if not owners:
            return []
        frame = user_frame(sys._getframe())
        events = []
        for name, t in owners:
            if name not in self.snapshots:
                self.snapshots[name] = _untraced_copy(t)
            events.append(WriteEvent(
                name, op, frame.f_code.co_filename if frame else "", frame.f_lineno if frame else 0,
                watch.current_module(), t._version, _read_so_far(t),
            ))
        self.events += events
        return events

    def after_write(self, events: list[WriteEvent]) -> None:
        owners = {name: t for name, t in self.state}
        for e in events:
            e.tracked = owners[e.name]._version != e.version_before

    def resolve(self, inputs: Mapping[str, torch._C.Value]) -> dict[str, torch.Tensor]:
        """After the trace: name → the value to export for each parameter or buffer the
        call wrote (its value before the call); raises for writes that cannot be
        exported exactly. ``inputs``: the graph input of each name."""
        problems: list[str] = []
        start: dict[str, torch.Tensor] = {}
        by_name: dict[str, list[WriteEvent]] = {}
        for e in self.events:
            by_name.setdefault(e.name, []).append(e)
        for name, t in self.state:
            if t.is_meta:  # no data: weights_from supplies its value before the call
                continue
            events = by_name.get(name, [])
            moved = t._version != self.versions[id(t)]
            check = self.unchanged[id(t)]
            silent = not moved and not events and check is not None and not check()
            problem = _silent_problem(name, inputs.get(name)) if silent else \
                _problem(name, events, moved, inputs.get(name))
            if silent:
                self.silent.append(name)
            if problem:
                problems.append(problem)
            elif moved:
                start[name] = self.snapshots[name]
        if problems:
            listing = "\n".join(f"  - {p}" for p in problems)
            raise StateMutationError(
                f"forward writes {len(problems)} parameter(s)/buffer(s) in a way the artifact "
                f"cannot reproduce; nothing was written:\n{listing}\nWhat to do: do not "
                "write parameters or buffers in forward (compute a new tensor instead, e.g. "
                "`w = self.weight * 2`), or make the write visible to the trace (no `.data`) "
                "and done before any read of the tensor."
            )
        return start

    def input_writes(self, watch: Watch, events: list[WriteEvent], sources: Sequence[Any]) -> None:
        """Values from the inputs' data written where the trace cannot see end up baked
        into the tensor: noted as specializations."""
        if any(watch.dependence.of_tensor(s) for s in sources if isinstance(s, torch.Tensor)):
            for e in events:
                watch.found.append(Specialization(
                    f"a value computed from the inputs written into '{e.name}' through an alias "
                    "the trace does not follow (e.g. `.data`)", e.filename, e.lineno, e.module,
                ))


def _untraced_copy(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` that the trace does not record."""
    state = torch_private.tracing_state()
    torch_private.set_tracing_state(None)
    try:
        return t.detach().clone()
    finally:
        torch_private.set_tracing_state(state)


def _read_so_far(t: torch.Tensor) -> bool:
    if torch_private.tracing_state() is None:
        return False
    try:
        return bool(torch_private.value_trace(t).uses())
    except RuntimeError:
        return False


def _problem(name: str, events: list[WriteEvent], moved: bool, value: torch._C.Value | None) -> str:
    """Why the writes into ``name`` cannot be exported exactly ("" if they can)."""
    untracked = [e for e in events if not e.tracked]
    if untracked and (moved or any(e.read_before for e in untracked)):
        e = next((e for e in untracked if e.read_before), untracked[0])
        why = "after the trace had read it" if e.read_before else "besides writes the trace recorded"
        return (f"'{name}' is written through an alias the trace does not follow (e.g. `.data`) "
                f"{why}: {e.where}")
    if moved and not events:
        ops = _writers_of(value) if value is not None else ""
        return (f"'{name}' was changed by the call but no write into it was seen (written "
                f"inside an op{': ' + ops if ops else ''})")
    return ""


STATISTICS_UPDATERS = frozenset({"aten::batch_norm", "aten::instance_norm", "aten::native_batch_norm",
                                 "aten::_native_batch_norm_legit"})
"""Ops that update running statistics they do not compute their output from (in
training mode): the value after the call is what the artifact should hold."""


def _silent_problem(name: str, value: torch._C.Value | None) -> str:
    """Why a tensor changed inside an op without its version counter moving cannot be
    exported ("" if only running-statistics updates read it)."""
    users = [use.user for use in value.uses()] if value is not None else []
    updaters = [u for u in users if u.kind() in STATISTICS_UPDATERS]
    early = [u for u in users if u not in updaters and not all(u.isAfter(w) for w in updaters)]
    if updaters and not early:
        return ""  # every other read comes after the update: the value after the call
    ops = "; ".join(dict.fromkeys(f"{u.kind()} at {source_of(u) or 'an unknown source line'}"
                                  for u in early or users))
    return (f"'{name}' was changed inside an op without its version counter moving, so the "
            f"trace cannot tell which reads saw the old value{': read by ' + ops if ops else ''}")


def _writers_of(value: torch._C.Value) -> str:
    """The ops of the traced graph that may write ``value`` (their schema says so), with
    their source lines, for the message."""
    found = []
    for use in value.uses():
        node = use.user
        if "!" in _schema(node):
            found.append(f"{node.kind()} at {source_of(node) or 'an unknown source line'}")
    return "; ".join(dict.fromkeys(found[:8]))


def _schema(node: torch._C.Node) -> str:
    try:
        return str(node.schema())
    except RuntimeError:
        return ""


__all__ = ["StateWrites", "WriteEvent", "storage_key"]
