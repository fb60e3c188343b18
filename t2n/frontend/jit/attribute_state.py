"""Module attributes that a scripted forward reassigns: state made explicit.

A streaming model often keeps its state in its own attributes (``self._state =
new_state``, a context of past samples, the sample rate it last saw) instead of taking
and returning it. Freezing such a model would bake whatever values the attributes
held at export into the graph, and the artifact would silently compute every chunk as
if it were that one. Before anything else, hardening turns each attribute the forward
writes (``prim::SetAttr``, in any method it calls) into values of the graph:

* a **tensor** attribute (assigned, or written in place: ``self.acc.add_(x)``)
  becomes an input of the graph (named after its dotted path,
  holding its value at export as the example) and an output (``<name>_out``, its value
  after the call): the artifact is the step function ``(inputs, state) → (outputs,
  state)``, fed its own state chunk after chunk;
* a **scalar** attribute (int, float, bool, str, None) becomes the constant it holds,
  so the branches it decides are taken as at export. That is only right while the call
  leaves it unchanged (the steady state of a model that has run once): then the export
  warns, naming it and its value. A scalar that the call changes and that decides
  anything (the first call of a fresh model, which resets its state) is refused with
  :class:`~t2n.errors.AttributeStateError`, naming each such attribute with its value
  before and after; one that decides nothing is dropped with a warning.

Reads and writes inside ``if`` and loop blocks are threaded through them (the blocks
get outputs, loops carried values), so a read always sees the last write before it.
"""

from __future__ import annotations

import copy
import logging
import warnings
from collections.abc import Iterable
from typing import Any

import attrs
import torch

from t2n.errors import AttributeStateError
from t2n.frontend.context import source_of
from t2n.frontend.jit.graph_edit import all_nodes
from t2n.frontend.value_walk import ValueWalk

log = logging.getLogger("t2n.frontend")

SCALAR_TYPES = (bool, int, float, str, type(None))


class AttributeStateWarning(UserWarning):
    """A module attribute the scripted forward writes was fixed at its value at export
    (it holds that value before and after the call), or dropped (it decides nothing)."""


@attrs.frozen
class StateAttribute:
    """An attribute the forward writes: its dotted path from the root module, and its
    value before the call (a clone for tensors)."""

    path: str
    initial: Any

    @property
    def tensor(self) -> bool:
        return isinstance(self.initial, torch.Tensor)

    @property
    def input_name(self) -> str:
        return self.path.replace(".", "_")

    @property
    def output_name(self) -> str:
        return f"{self.input_name}_out"


def _split(path: str) -> tuple[str, str]:
    owner, _, name = path.rpartition(".")
    return owner, name


def _owner(module: Any, owner: str) -> Any:
    obj = module
    for part in owner.split(".") if owner else ():
        obj = getattr(obj, part)
    return obj


def read_attribute(module: Any, path: str) -> Any:
    owner, name = _split(path)
    return getattr(_owner(module, owner), name)


def write_attribute(module: Any, path: str, value: Any) -> None:
    owner, name = _split(path)
    setattr(_owner(module, owner), name, value)


def snapshot(module: Any, paths: Iterable[str]) -> dict[str, Any]:
    """The attributes' values now (tensors cloned), to put back with :func:`restore`."""
    out = {}
    for p in paths:
        v = read_attribute(module, p)
        out[p] = v.detach().clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v)
    return out


def restore(module: Any, values: dict[str, Any]) -> None:
    for p, v in values.items():
        write_attribute(module, p, v.clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v))


def _path_of(owner: torch._C.Value, self_value: torch._C.Value) -> str | None:
    """The dotted path of the module ``owner`` stands for, from the graph's ``self``."""
    parts = []
    while owner.unique() != self_value.unique():
        node = owner.node()
        if node.kind() != "prim::GetAttr":
            return None
        parts.append(node.s("name"))
        owner = node.inputsAt(0)
    return ".".join(reversed(parts))


def _key(node: torch._C.Node, self_value: torch._C.Value) -> str | None:
    owner = _path_of(node.inputsAt(0), self_value)
    if owner is None:
        return None
    return f"{owner}.{node.s('name')}" if owner else node.s("name")


def _alias_effects(node: torch._C.Node) -> tuple[set[int], set[int]]:
    """Inputs of ``node`` it writes in place, and inputs its outputs are views of."""
    schema = node.schema()
    if schema == "(no schema)":
        return set(), set()
    parsed = torch._C.parse_schema(schema)
    returned: set[str] = set()
    for r in parsed.returns:
        if r.alias_info is not None:
            returned |= set(r.alias_info.before_set)
    writes, views = set(), set()
    for i, arg in enumerate(parsed.arguments):
        info = arg.alias_info
        if info is None:
            continue
        if info.is_write:
            writes.add(i)
        elif set(info.before_set) & returned:
            views.add(i)
    return writes, views


def _written_in_place(start: torch._C.Value) -> bool:
    """Whether an op writes ``start`` (or a view of it) in place."""
    walk = ValueWalk(start)
    for v in walk:
        for use in v.uses():
            writes, views = _alias_effects(use.user)
            if use.offset in writes:
                return True
            if use.offset in views:
                walk.push(o for o in use.user.outputs() if o.type().kind() == "TensorType")
    return False


def written_attributes(graph: torch._C.Graph) -> list[str]:
    """Dotted paths of the attributes the (inlined) forward writes, in order: assigned
    (``self.x = ...``) or, for tensors, written in place (``self.x.add_(...)``)."""
    self_value = next(iter(graph.inputs()))
    found: dict[str, None] = {}
    for node in all_nodes(graph.block()):
        if node.kind() == "prim::GetAttr" and node.output().type().kind() == "TensorType" and \
                _written_in_place(node.output()):
            key = _key(node, self_value)
            if key is not None:
                found[key] = None
        if node.kind() == "prim::SetAttr":
            key = _key(node, self_value)
            if key is None:
                raise AttributeStateError(
                    f"forward writes attribute {node.s('name')!r} of a module it does not reach "
                    f"through its own attributes ({source_of(node) or 'no source line'}), which "
                    "t2n cannot turn into state inputs. What to do: keep the state on the "
                    "module itself or one of its submodules, or pass it as an argument",
                    [node.s("name")])
            found[key] = None
    return list(found)


def state_attributes(module: Any, paths: list[str]) -> list[StateAttribute]:
    """The written attributes with their current values; other types are refused."""
    out, bad = [], []
    for p in paths:
        value = read_attribute(module, p)
        if isinstance(value, torch.Tensor):
            out.append(StateAttribute(p, value.detach().clone()))
        elif isinstance(value, SCALAR_TYPES):
            out.append(StateAttribute(p, value))
        else:
            bad.append(f"{p} ({type(value).__name__})")
    if bad:
        raise AttributeStateError(
            f"forward reassigns attribute(s) {', '.join(bad)}: t2n turns written tensor "
            "attributes into state inputs and outputs and fixes written scalars, but cannot "
            "carry lists, dicts or objects from call to call. What to do: keep the state in "
            "tensor attributes, or pass it as arguments and return it",
            [b.split(" ")[0] for b in bad])
    return out


@attrs.define
class ExplicitState:
    """What :func:`make_state_explicit` did: the attributes, the graph inputs it added for
    the tensor ones (in order) and where the final values sit in the return tuple."""

    attributes: list[StateAttribute]
    influences: dict[str, bool] = attrs.field(factory=dict)

    @property
    def tensors(self) -> list[StateAttribute]:
        return [a for a in self.attributes if a.tensor]

    @property
    def scalars(self) -> list[StateAttribute]:
        return [a for a in self.attributes if not a.tensor]


def _written_in(block: torch._C.Block, keys: set[str], self_value: torch._C.Value) -> list[str]:
    found: dict[str, None] = {}
    for node in all_nodes(block):
        if node.kind() == "prim::SetAttr":
            key = _key(node, self_value)
            if key in keys:
                found[key] = None
    return list(found)


class _Converter:
    def __init__(self, graph: torch._C.Graph, keys: set[str], types: dict[str, torch._C.JitType]) -> None:
        self.graph = graph
        self.keys = keys
        self.types = types
        self.self_value = next(iter(graph.inputs()))

    def block(self, block: torch._C.Block, env: dict[str, torch._C.Value]) -> None:
        for node in list(block.nodes()):
            kind = node.kind()
            key = _key(node, self.self_value) if kind in ("prim::GetAttr", "prim::SetAttr") else None
            if kind == "prim::GetAttr" and key in self.keys:
                node.output().replaceAllUsesWith(env[key])
                node.destroy()
            elif kind == "prim::SetAttr" and key in self.keys:
                env[key] = node.inputsAt(1)
                node.destroy()
            elif kind == "prim::If":
                self.if_node(node, env)
            elif kind == "prim::Loop":
                self.loop_node(node, env)
            elif any(_written_in(b, self.keys, self.self_value) for b in node.blocks()):
                raise AttributeStateError(
                    f"forward writes attributes inside a {kind} block ({source_of(node) or 'no source line'}), "
                    "which t2n cannot thread through. What to do: write them outside it",
                    _written_in(next(iter(node.blocks())), self.keys, self.self_value))

    def if_node(self, node: torch._C.Node, env: dict[str, torch._C.Value]) -> None:
        blocks = list(node.blocks())
        assigned = list(dict.fromkeys(k for b in blocks for k in _written_in(b, self.keys, self.self_value)))
        ends = []
        for b in blocks:
            inner = dict(env)
            self.block(b, inner)
            ends.append(inner)
        for key in assigned:
            for b, inner in zip(blocks, ends):
                b.registerOutput(inner[key])
            out = node.addOutput()
            out.setType(self.types[key])
            env[key] = out

    def loop_node(self, node: torch._C.Node, env: dict[str, torch._C.Value]) -> None:
        (body,) = list(node.blocks())
        assigned = _written_in(body, self.keys, self.self_value)
        inner = dict(env)
        loop: Any = node  # addInput(value) and addInputToBlock are not in torch's stubs
        block: Any = body
        for key in assigned:
            loop.addInput(env[key])
            param = block.addInputToBlock()
            param.setType(self.types[key])
            inner[key] = param
        self.block(body, inner)
        for key in assigned:
            body.registerOutput(inner[key])
            out = node.addOutput()
            out.setType(self.types[key])
            env[key] = out


def _declared_types(graph: torch._C.Graph, attributes: list[StateAttribute]) -> dict[str, torch._C.JitType]:
    self_value = next(iter(graph.inputs()))
    types: dict[str, torch._C.JitType] = {}
    for a in attributes:
        if a.tensor:
            types[a.path] = torch._C.TensorType.get()
    for node in all_nodes(graph.block()):
        if node.kind() in ("prim::GetAttr", "prim::SetAttr"):
            key = _key(node, self_value)
            if key is not None and key not in types:
                v = node.output() if node.kind() == "prim::GetAttr" else node.inputsAt(1)
                types[key] = v.type()
    return types


def _influences(start: torch._C.Value, own_slot: int, final: torch._C.Node) -> bool:
    """Whether ``start`` (a scalar attribute's value before the call) reaches anything but
    its own final value: an output, another attribute, a branch or loop condition."""
    walk = ValueWalk(start)
    for v in walk:
        for use in v.uses():
            user = use.user
            if user.kind() == "prim::TupleConstruct" and user.output().unique() == final.output().unique():
                if use.offset != own_slot:
                    return True
                continue
            if user.kind() in ("prim::If", "prim::Loop"):
                return True
            if user.kind() == "prim::Return":
                owner = user.owningBlock().owningNode()
                if owner is None:
                    return True
                walk.push(owner.outputs())
                continue
            walk.push(user.outputs())
    return False


def make_state_explicit(graph: torch._C.Graph, attributes: list[StateAttribute]) -> ExplicitState:
    """Rewrite the inlined ``graph``: reads and writes of ``attributes`` become values; a
    graph input per tensor attribute (appended), and the graph returns
    ``(original result, final value of each attribute...)``."""
    state = ExplicitState(attributes)
    if not attributes:
        return state
    g: Any = graph  # insertConstant is not in torch's stubs
    types = _declared_types(graph, attributes)
    env: dict[str, torch._C.Value] = {}
    starts: dict[str, torch._C.Value] = {}
    first = next(iter(graph.nodes()))
    for a in attributes:
        if a.tensor:
            v = graph.addInput(a.input_name)
            v.setType(torch._C.TensorType.get())
        else:
            with graph.insert_point_guard(first):
                v = g.insertConstant(a.initial)
        env[a.path] = starts[a.path] = v
    _Converter(graph, {a.path for a in attributes}, types).block(graph.block(), env)
    (result,) = list(graph.outputs())
    items = [result, *[env[a.path] for a in attributes]]
    final = graph.create("prim::TupleConstruct", items, 1)
    final.insertBefore(graph.return_node())
    final.output().setType(torch._C.TupleType([v.type() for v in items]))
    graph.eraseOutput(0)
    graph.registerOutput(final.output())
    for i, a in enumerate(attributes):
        if not a.tensor:
            state.influences[a.path] = _influences(starts[a.path], i + 1, final)
    return state


def settle_scalars(graph: torch._C.Graph, state: ExplicitState, after: dict[str, Any]) -> None:
    """After hardening: check each scalar attribute against its value ``after`` the
    reference call (see the module doc) and take the scalars out of the returned tuple,
    which then holds the result and the tensors' final values."""
    if not state.attributes:
        return
    final = graph.return_node().inputsAt(0).node()
    items = list(final.inputs())
    changed, fixed, dropped = [], [], []
    for a in state.scalars:
        value = after.get(a.path)
        steady = type(value) is type(a.initial) and value == a.initial
        if not state.influences.get(a.path, True):
            if not steady:
                dropped.append(f"{a.path} ({a.initial!r} before the call, {value!r} after)")
        elif steady:
            fixed.append(f"{a.path} = {a.initial!r}")
        else:
            changed.append((a.path, a.initial, value))
    if changed:
        listed = "; ".join(f"{p}: {before!r} before the call, {after!r} after" for p, before, after in changed)
        raise AttributeStateError(
            f"forward changes attribute(s) that decide what it computes: {listed}. An exported "
            "graph follows one value of each, and this call leaves a different one for the next "
            "call (a fresh model resetting its state on its first call, typically). What to do: "
            "call the model once on example inputs before exporting, so that these attributes "
            "hold the values every later call keeps, then export; or pass the state as "
            "arguments", [p for p, _, _ in changed])
    if fixed:
        warnings.warn(AttributeStateWarning(
            "forward writes attribute(s) " + ", ".join(fixed) + ", which keep these values through "
            "the call: the export is specialized to them (a call with other values would need "
            "another export)"), stacklevel=2)
    if dropped:
        warnings.warn(AttributeStateWarning(
            "forward updates attribute(s) " + ", ".join(dropped) + " that decide nothing it "
            "computes: the export does not keep them"), stacklevel=2)
    kept = [items[0]] + [v for a, v in zip(state.attributes, items[1:]) if a.tensor]
    new = graph.create("prim::TupleConstruct", kept, 1)
    new.insertBefore(final)
    new.output().setType(torch._C.TupleType([v.type() for v in kept]))
    final.output().replaceAllUsesWith(new.output())
    final.destroy()


__all__ = ["AttributeStateWarning", "ExplicitState", "StateAttribute", "make_state_explicit",
           "restore", "settle_scalars", "snapshot", "state_attributes", "written_attributes"]
