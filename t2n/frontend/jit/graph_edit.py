"""Small editing helpers over ``torch._C.Graph`` shared by the hardening passes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from t2n.frontend import torch_private

SCALAR_KINDS = ("IntType", "FloatType", "BoolType", "NoneType", "StringType", "NumberType")


def all_nodes(block: torch._C.Block) -> Iterator[torch._C.Node]:
    """Every node of a block, sub-blocks included (outer nodes first)."""
    for node in list(block.nodes()):
        yield node
        for sub in node.blocks():
            yield from all_nodes(sub)


def is_constant(v: torch._C.Value) -> bool:
    return v.node().kind() == "prim::Constant"


def constant_value(v: torch._C.Value) -> Any:
    return v.toIValue() if v.node().hasAttribute("value") else None


def is_scalar(v: torch._C.Value) -> bool:
    return v.type().kind() in SCALAR_KINDS


def replace_with_constant(graph: torch._C.Graph, v: torch._C.Value, value: Any) -> None:
    """Point every use of ``v`` at a new constant, placed right before ``v``'s node."""
    node = v.node()
    anchor = next(iter(graph.nodes())) if node.kind() == "prim::Param" else node
    g: Any = graph  # insertConstant is not in torch's stubs
    with graph.insert_point_guard(anchor):
        c = g.insertConstant(value)
    v.replaceAllUsesWith(c)


def inline_block(if_node: torch._C.Node, branch: int) -> None:
    """Replace ``if_node`` by the nodes of one of its blocks."""
    block = list(if_node.blocks())[branch]
    for n in list(block.nodes()):
        n.moveBefore(if_node)
    for out, ret in zip(list(if_node.outputs()), list(block.returnNode().inputs())):
        out.replaceAllUsesWith(ret)
    if_node.destroy()


def drop_unused(graph: torch._C.Graph) -> None:
    torch_private.dead_code_elimination(graph)
