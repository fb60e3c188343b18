"""The hardening steps. Each rewrites the TorchScript graph in place and returns how
many changes it made; ``harden_jit_for_export`` runs them to a fixed point."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import torch

from t2n.frontend.jit.graph_edit import (
    NOT_FOLDED,
    all_nodes,
    constant_value,
    folded_scalar,
    inline_block,
    is_constant,
    is_scalar,
    replace_with_constant,
)
from t2n.frontend.jit.loops import resolve_list_appends, unroll_constant_loops
from t2n.frontend.jit.probe import probe


@attrs.define
class HardenState:
    """The graph being hardened, the object its ``self`` input stands for, and the example
    arguments matching its remaining inputs."""

    graph: torch._C.Graph
    self_obj: Any
    args: list[Any]


def _is_none_check(node: torch._C.Node) -> bool | None:
    """``x is None`` / ``x is not None`` decided from types alone, else None."""
    a, b = list(node.inputs())
    for x, other in ((a, b), (b, a)):
        if other.type().kind() == "NoneType" and x.type().kind() not in ("OptionalType", "NoneType", "AnyType"):
            return node.kind() == "aten::__isnot__"
        if other.type().kind() == "NoneType" and x.type().kind() == "NoneType":
            return node.kind() == "aten::__is__"
    return None


def fold_constant_scalar_arithmetic(s: HardenState) -> int:
    """Comparisons, ``not``, ``in``, casts and arithmetic on constants become constants."""
    count = 0
    for node in list(all_nodes(s.graph.block())):
        decided = _is_none_check(node) if node.kind() in ("aten::__is__", "aten::__isnot__") else None
        value = decided if decided is not None else folded_scalar(node)
        if value is not NOT_FOLDED:
            replace_with_constant(s.graph, node.output(), value)
            count += 1
    return count


def fold_constant_ifs(s: HardenState) -> int:
    """``prim::If`` on a constant condition becomes the branch it takes."""
    count = 0
    for node in list(all_nodes(s.graph.block())):
        if node.kind() == "prim::If" and is_constant(node.inputsAt(0)):
            inline_block(node, 0 if constant_value(node.inputsAt(0)) else 1)
            count += 1
            break  # the node list changed; the driver runs this step again
    return count


def fold_tuple_index_through_tuple_construct(s: HardenState) -> int:
    count = 0
    for node in list(all_nodes(s.graph.block())):
        if node.kind() in ("prim::TupleIndex", "aten::__getitem__"):
            seq, idx = list(node.inputs())
            if seq.node().kind() in ("prim::TupleConstruct", "prim::ListConstruct") and is_constant(idx):
                items = list(seq.node().inputs())
                i = constant_value(idx)
                if isinstance(i, int) and -len(items) <= i < len(items):
                    node.output().replaceAllUsesWith(items[i])
                    count += 1
    return count


def fold_tuple_unpack_through_tuple_construct(s: HardenState) -> int:
    count = 0
    for node in list(all_nodes(s.graph.block())):
        if node.kind() in ("prim::TupleUnpack", "prim::ListUnpack"):
            src = node.inputsAt(0).node()
            if src.kind() in ("prim::TupleConstruct", "prim::ListConstruct") and \
                    src.inputsSize() == node.outputsSize():
                for out, item in zip(list(node.outputs()), list(src.inputs())):
                    out.replaceAllUsesWith(item)
                count += 1
    return count


def strip_prim_data(s: HardenState) -> int:
    count = 0
    for node in list(all_nodes(s.graph.block())):
        if node.kind() == "prim::data":
            node.output().replaceAllUsesWith(node.inputsAt(0))
            count += 1
    return count


def _only_raises(block: torch._C.Block) -> bool:
    kinds = [n.kind() for n in block.nodes()]
    return "prim::RaiseException" in kinds and all(
        k in ("prim::RaiseException", "prim::Constant", "aten::format", "aten::str", "prim::Uninitialized")
        for k in kinds
    )


def strip_assertion_ifs(s: HardenState) -> int:
    """``if cond: raise …`` checks (assertions) are dropped: the example inputs passed them."""
    count = 0
    for node in list(all_nodes(s.graph.block())):
        if node.kind() != "prim::If":
            continue
        blocks = list(node.blocks())
        for i, blk in enumerate(blocks):
            other = blocks[1 - i]
            if _only_raises(blk):
                if node.outputsSize() == 0 and not list(other.nodes()):
                    node.destroy()
                else:
                    inline_block(node, 1 - i)
                return 1  # nodes were destroyed: the driver runs this step again
    return count


def _control_inputs(node: torch._C.Node) -> list[torch._C.Value]:
    if node.kind() == "prim::If":
        return [node.inputsAt(0)]
    if node.kind() == "prim::Loop":
        body = next(iter(node.blocks()))
        return [node.inputsAt(0), node.inputsAt(1), body.returnNode().inputsAt(0)]
    return []


_SIZE_OPS = ("aten::size", "aten::dim", "aten::len", "aten::numel")


def _hoist(node: torch._C.Node, top: torch._C.Block) -> bool:
    """Move a size read out of nested blocks when what it reads is defined at top level
    (a size is the same wherever it is read), so that it can be probed. The length of a
    list is not: a list may grow in between, so ``len`` of a list stays where it is."""
    if any(v.type().kind() == "ListType" for v in node.inputs()):
        return False
    if not all(v.node().owningBlock() == top or v.node().kind() == "prim::Param" for v in node.inputs()):
        return False
    outer = node
    while outer.owningBlock() != top:
        outer = outer.owningBlock().owningNode()
    node.moveBefore(outer)
    return True


def replace_size_calls_with_constants(s: HardenState) -> int:
    """Sizes that decide control flow become constants; sizes that only shape tensors
    stay in the graph so that dynamic axes still follow them."""
    top = s.graph.block()
    wanted: dict[int, torch._C.Value] = {}
    for node in all_nodes(top):
        for v in _control_inputs(node):
            stack, seen = [v], set()
            while stack:
                cur = stack.pop()
                if cur.unique() in seen or cur.type().kind() == "TensorType":
                    continue
                seen.add(cur.unique())
                producer = cur.node()
                if producer.kind() in _SIZE_OPS:
                    if producer.owningBlock() != top:
                        _hoist(producer, top)  # moved to the top level when it can be, to be probed
                    if producer.owningBlock() == top:
                        wanted[cur.unique()] = cur
                    continue
                if producer.kind() in ("prim::Param", "prim::Constant"):
                    continue
                stack.extend(producer.inputs())
    values = list(wanted.values())
    for v, val in zip(values, probe(s.graph, s.self_obj, s.args, values)):
        replace_with_constant(s.graph, v, val)
    return len(values)


def fold_data_dependent_ifs(s: HardenState) -> int:
    """Each remaining top-level ``prim::If`` takes the branch the example inputs take.
    Loops are not specialised this way: a trip count the data decides is refused."""
    top = s.graph.block()
    conds = []
    for node in top.nodes():
        if node.kind() == "prim::If" and not is_constant(node.inputsAt(0)):
            conds.append(node.inputsAt(0))
    values = probe(s.graph, s.self_obj, s.args, conds)
    for v, val in zip(conds, values):
        replace_with_constant(s.graph, v, bool(val) if v.type().kind() == "BoolType" else val)
    return len(conds)


STEPS: list[tuple[str, Callable[[HardenState], int]]] = [
    ("fold_constant_scalar_arithmetic", fold_constant_scalar_arithmetic),
    ("fold_constant_ifs", fold_constant_ifs),
    ("fold_tuple_index_through_tuple_construct", fold_tuple_index_through_tuple_construct),
    ("fold_tuple_unpack_through_tuple_construct", fold_tuple_unpack_through_tuple_construct),
    ("strip_prim_data", strip_prim_data),
    ("strip_assertion_ifs", strip_assertion_ifs),
    ("unroll_constant_loops", unroll_constant_loops),
    ("resolve_list_appends", resolve_list_appends),
]
"""Steps that only look at the graph, run to a fixed point before anything is probed
(a probe compiles the graph, which fails while dead branches use bound ``None``s)."""

PROBING_STEPS: list[tuple[str, Callable[[HardenState], int]]] = [
    ("replace_size_calls_with_constants", replace_size_calls_with_constants),
    ("fold_data_dependent_ifs", fold_data_dependent_ifs),
]
"""Steps that run the graph on the example inputs, in order, each once the others settle."""

__all__ = ["PROBING_STEPS", "STEPS", "HardenState", "is_scalar"]
