"""Loops and lists in a TorchScript graph being hardened.

A scripted loop whose trip count (and condition) the example inputs fix, once sizes
are constants, is unrolled: its body is copied into the enclosing block once per
iteration with the iteration index and the carried values bound. Lists that the
unrolled code grows with ``append`` are then rewritten into one ``ListConstruct`` per
reader, holding the elements the list has at that point, so that ``stack``, ``cat``,
indexing and ``len`` see plain lists. A loop whose trip count still depends on the
data when nothing more can be folded is refused, naming its source line.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from t2n.errors import DataDependentLoopError, TraceError
from t2n.frontend.context import source_of
from t2n.frontend.jit.graph_edit import (
    NOT_FOLDED,
    all_nodes,
    constant_value,
    folded_scalar,
    is_constant,
)

MAX_UNROLL = 4096
"""Iterations unrolled per loop; a longer loop is left to the lowering, which refuses it."""

LIST_MUTATORS = frozenset({
    "aten::insert", "aten::pop", "aten::_set_item", "aten::clear", "aten::extend",
    "aten::reverse", "aten::remove", "aten::sort", "aten::add_", "aten::__setitem__",
})
"""List operations other than ``append`` that change the list: a list they touch is
left as it is (and the lowering reports what it cannot follow)."""

CONTAINERS = frozenset({"prim::TupleConstruct", "prim::ListConstruct", "prim::DictConstruct",
                        "prim::Return", "prim::CallFunction", "prim::CallMethod"})
"""Uses that keep a reference to the list: allowed only after its last ``append``."""


def fold_scalar_nodes(graph: torch._C.Graph, nodes: Iterable[torch._C.Node]) -> dict[int, torch._C.Value]:
    """Scalar operations on constants among ``nodes`` become constants (in order, so a
    fold feeds the next); the new constant for each folded output, by its ``unique()``."""
    folded: dict[int, torch._C.Value] = {}
    g: Any = graph  # insertConstant is not in torch's stubs
    for node in nodes:
        value = folded_scalar(node)
        if value is NOT_FOLDED:
            continue
        with graph.insert_point_guard(node):
            constant = g.insertConstant(value)
        node.output().replaceAllUsesWith(constant)
        folded[node.output().unique()] = constant
    return folded


def _constant_int(v: torch._C.Value) -> int | None:
    if not is_constant(v):
        return None
    value = constant_value(v)
    return int(value) if isinstance(value, (bool, int)) else None


def _peel(graph: torch._C.Graph, loop: torch._C.Node, index: int,
          carried: list[torch._C.Value]) -> tuple[torch._C.Value, list[torch._C.Value]]:
    """Copy the loop body before ``loop`` for iteration ``index`` with ``carried`` bound;
    the copy's condition and carried values."""
    (body,) = list(loop.blocks())
    params = list(body.inputs())
    g: Any = graph  # createClone and insertConstant are not in torch's stubs
    with graph.insert_point_guard(loop):
        env: dict[int, torch._C.Value] = {params[0].unique(): g.insertConstant(index)}
    env.update({p.unique(): v for p, v in zip(params[1:], carried)})
    copies = []
    for node in body.nodes():
        copy = g.createClone(node, lambda v: env.get(v.unique(), v))
        copy.insertBefore(loop)
        for old, new in zip(node.outputs(), copy.outputs()):
            env[old.unique()] = new
        copies.append(copy)
    folded = fold_scalar_nodes(graph, copies)
    returns = [env.get(r.unique(), r) for r in body.returnNode().inputs()]
    returns = [folded.get(r.unique(), r) for r in returns]
    return returns[0], returns[1:]


def _runs_to_its_trip_count(loop: torch._C.Node) -> bool:
    """A ``for`` loop: its body's condition is the constant true."""
    (body,) = list(loop.blocks())
    return _constant_int(body.returnNode().inputsAt(0)) == 1


def _unroll(graph: torch._C.Graph, loop: torch._C.Node) -> bool:
    """Unroll one top-level loop as far as its condition stays constant (at most
    ``MAX_UNROLL`` iterations); True if changed."""
    trips, go = _constant_int(loop.inputsAt(0)), _constant_int(loop.inputsAt(1))
    if trips is None or go is None:
        return False
    if trips > MAX_UNROLL and _runs_to_its_trip_count(loop):
        return False  # the lowering names it as too long to unroll
    carried = list(loop.inputs())[2:]
    cond, index = loop.inputsAt(1), 0
    while go and index < trips:
        if index == MAX_UNROLL:
            raise TraceError(
                f"a loop at {source_of(loop) or '(no source line recorded)'} runs more than "
                f"{MAX_UNROLL} iterations on the example inputs, too many to unroll. What to do: "
                "export with smaller example inputs, or write the repetition as a tensor operation")
        cond, carried = _peel(graph, loop, index, carried)
        index += 1
        go = _constant_int(cond)
        if go is None:
            _restart(graph, loop, index, trips - index, cond, carried)
            return True
    for out, value in zip(list(loop.outputs()), carried):
        out.replaceAllUsesWith(value)
    loop.destroy()
    return True


def _restart(graph: torch._C.Graph, loop: torch._C.Node, offset: int, trips: int,
             cond: torch._C.Value, carried: list[torch._C.Value]) -> None:
    """Leave ``loop`` to run the iterations not unrolled: from ``offset`` on, with the
    peeled condition and carried values as its inputs."""
    (body,) = list(loop.blocks())
    g: Any = graph
    with graph.insert_point_guard(loop):
        loop.replaceInput(0, g.insertConstant(trips))
    loop.replaceInput(1, cond)
    for i, value in enumerate(carried):
        loop.replaceInput(2 + i, value)
    index = body.inputs().__next__()
    first = body.nodes().__next__() if list(body.nodes()) else body.returnNode()
    with graph.insert_point_guard(first):
        shifted = g.insertNode(g.create("aten::add", [index, g.insertConstant(offset)], 1))
    shifted.output().setType(torch._C.IntType.get())
    index.replaceAllUsesWith(shifted.output())
    shifted.replaceInput(0, index)


def unroll_constant_loops(s: Any) -> int:
    """Top-level loops whose trip count and condition are constants are unrolled."""
    for node in list(s.graph.block().nodes()):
        if node.kind() == "prim::Loop" and _unroll(s.graph, node):
            return 1  # the node list changed; the driver runs this step again
    return 0


def _position(block: torch._C.Block) -> dict[torch._C.Node, int]:
    return {n: i for i, n in enumerate(block.nodes())}


def _rewrite_list(graph: torch._C.Graph, made: torch._C.Node, order: dict[torch._C.Node, int]) -> bool:
    """Replace the appends to the list ``made`` builds by one ListConstruct per reader."""
    lst = made.output()
    users = [u.user for u in lst.uses()]
    if any(u not in order for u in users):
        return False  # used inside a block: not unrolled yet
    users.sort(key=lambda u: order[u] if u.kind() != "prim::Return" else len(order))
    appends = [u for u in users if u.kind() == "aten::append" and u.inputsAt(0) == lst]
    if not appends or any(u.kind() in LIST_MUTATORS for u in users):
        return False
    last = order[appends[-1]]
    if any(u.kind() in CONTAINERS and u.kind() != "prim::Return" and order[u] < last for u in users):
        return False
    elements = list(made.inputs())
    for user in users:
        if user.kind() == "aten::append" and user.inputsAt(0) == lst:
            elements.append(user.inputsAt(1))
            user.output().replaceAllUsesWith(lst)
            user.destroy()
            continue
        snapshot = graph.create("prim::ListConstruct", elements, 1)
        snapshot.output().setType(lst.type())
        snapshot.insertBefore(user) if user.kind() != "prim::Return" else snapshot.insertBefore(graph.return_node())
        user.replaceInputWith(lst, snapshot.output())
    return True


def resolve_list_appends(s: Any) -> int:
    """Top-level lists grown by ``append`` become a plain list at each reader."""
    top = s.graph.block()
    for node in list(top.nodes()):
        if node.kind() == "prim::ListConstruct" and _rewrite_list(s.graph, node, _position(top)):
            return 1
    return 0


DATA_READS = frozenset({"aten::Int", "aten::Float", "aten::Bool", "aten::item", "aten::IntImplicit",
                        "aten::FloatImplicit", "aten::ScalarImplicit", "aten::is_nonzero",
                        "aten::equal", "aten::allclose", "aten::tolist"})
"""Operations that turn tensor data into a Python value."""


def _reads_data(loop: torch._C.Node) -> bool:
    """Whether the loop's trip count or condition is computed from tensor data (as
    opposed to sizes not yet folded)."""
    (body,) = list(loop.blocks())
    stack = [loop.inputsAt(0), loop.inputsAt(1), body.returnNode().inputsAt(0)]
    seen: set[int] = set()
    while stack:
        value = stack.pop()
        if value.unique() in seen:
            continue
        seen.add(value.unique())
        node = value.node()
        if node.kind() in DATA_READS:
            return True
        if node.kind() not in ("prim::Param", "prim::Constant", "prim::Loop", "prim::If"):
            stack.extend(node.inputs())
    return False


def refuse_data_dependent_loops(graph: torch._C.Graph) -> None:
    """Any loop left after hardening runs a number of times the data decides (or one
    that hardening could not settle: named too, as a plain TraceError)."""
    loops = [n for n in all_nodes(graph.block()) if n.kind() == "prim::Loop" and
             (_constant_int(n.inputsAt(0)) is None or _constant_int(n.inputsAt(1)) is None)]
    if not loops:
        return
    places = [source_of(n) or "(no source line recorded)" for n in loops]
    if not any(_reads_data(n) for n in loops):
        raise TraceError(
            f"{len(loops)} loop(s) could not be unrolled: their trip count follows the sizes "
            "of tensors computed inside the loop, which hardening could not settle: "
            + "; ".join(places) + ". What to do: bound the loop by the sizes of the inputs "
            "(for i in range(x.size(1) // chunk)), or trace the model instead of scripting it")
    raise DataDependentLoopError(
        f"{len(loops)} loop(s) run a number of times that depends on the input data, which "
        "an exported graph cannot follow: " + "; ".join(places) + ". What to do: make the "
        "trip count depend on sizes only (for i in range(x.size(1) // chunk)), or on "
        "arguments fixed at export time, or trace the model instead of scripting it",
        places,
    )
