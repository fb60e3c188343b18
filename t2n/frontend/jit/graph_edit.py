"""Small editing helpers over ``torch._C.Graph`` shared by the hardening passes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from t2n.frontend import torch_private
from t2n.frontend.jit.scalars import SCALAR_FOLD_ERRORS, SCALAR_OPS

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


NOT_FOLDED: Any = object()
"""What :func:`folded_scalar` gives for a node it does not fold (``None`` is a value)."""


def folded_scalar(node: torch._C.Node) -> Any:
    """The value of a scalar op (:data:`~t2n.frontend.jit.scalars.SCALAR_OPS`) whose inputs
    are all constants, when Python computes it and it is a bool, int, float, str or None;
    else ``NOT_FOLDED`` (the node is left to the lowering rules)."""
    kind = node.kind()
    if kind not in SCALAR_OPS or node.outputsSize() != 1 or node.output().type().kind() == "TensorType":
        return NOT_FOLDED
    ins = list(node.inputs())
    if not all(is_constant(v) and v.type().kind() != "TensorType" for v in ins):
        return NOT_FOLDED
    try:
        value = SCALAR_OPS[kind](*[constant_value(v) for v in ins])
    except SCALAR_FOLD_ERRORS:
        return NOT_FOLDED
    return value if isinstance(value, (bool, int, float, str)) or value is None else NOT_FOLDED


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
