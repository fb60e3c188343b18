"""Python numbers that torch.export reads from tensors holding only constants, folded.

A model may compute a size from its buffers and from sizes it knows while exporting
(transformers' Mimi and EnCodec: the extra padding of a causal convolution, from ``stride``
and ``kernel_size`` buffers and the input's length), then read it with ``.item()``.
torch.export cannot see that the number is fixed: it makes it a data-dependent size
(``aten::item``, an unbacked symbol), which t2n would refuse. The TorchScript trace stores
such a number as a constant. Here the tensor is computed from the program's own
parameters, buffers and constants, before the program is decomposed (whose retrace then
sees a plain number); a number that depends on an input, a random draw, or a size that
stays a symbol is left alone (and refused by name later).
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind
from torch.fx.node import map_aggregate

from t2n.frontend.export.refusals import node_source_line

log = logging.getLogger("t2n.frontend")

_ITEMS = frozenset({torch.ops.aten.item.default, torch.ops.aten._local_scalar_dense.default})
_UNKNOWN = object()
"""What a node evaluates to when it depends on something other than constants."""


def fold_constant_items(program: ExportedProgram) -> int:
    """Replace each ``item`` of a tensor computed only from constants by its number, in
    place; returns how many were folded (logged)."""
    graph = program.graph
    known = _constant_inputs(program)
    memo: dict[torch.fx.Node, Any] = {}
    folded = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in _ITEMS:
            continue
        value = _evaluate(node.args[0], known, memo)
        if not isinstance(value, torch.Tensor) or value.numel() != 1 or value.is_meta:
            continue
        number = value.item()
        _replace_uses(node, number)
        graph.erase_node(node)
        folded += 1
        log.info("a number read from constants is folded to %r: %s", number, node_source_line(node) or node.name)
    if folded:
        graph.lint()
        program.graph_module.recompile()
    return folded


def _replace_uses(node: torch.fx.Node, number: Any) -> None:
    """Every reader of ``node`` takes ``number`` in its place."""
    def swap(a: Any) -> Any:
        return number if a is node else a

    for user in list(node.users):
        user.args = map_aggregate(user.args, swap)
        user.kwargs = map_aggregate(user.kwargs, swap)


def _constant_inputs(program: ExportedProgram) -> dict[str, torch.Tensor]:
    """Placeholder name → tensor, for the program's parameters, buffers and constants."""
    kinds = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
    out = {}
    for spec in program.graph_signature.input_specs:
        if spec.kind in kinds and spec.target is not None:
            tensor = program.state_dict.get(spec.target, program.constants.get(spec.target))
            if isinstance(tensor, torch.Tensor):
                out[spec.arg.name] = tensor
    return out


def _evaluate(arg: Any, known: dict[str, torch.Tensor], memo: dict[torch.fx.Node, Any]) -> Any:
    """``arg`` computed with PyTorch from constants only, or ``_UNKNOWN``."""
    if not isinstance(arg, torch.fx.Node):
        if isinstance(arg, (list, tuple)):
            items = [_evaluate(a, known, memo) for a in arg]
            return _UNKNOWN if any(i is _UNKNOWN for i in items) else type(arg)(items)
        return arg
    if arg not in memo:
        memo[arg] = _evaluate_node(arg, known, memo)
    return memo[arg]


def _evaluate_node(node: torch.fx.Node, known: dict[str, torch.Tensor], memo: dict[torch.fx.Node, Any]) -> Any:
    if node.op == "placeholder":
        return known.get(node.name, _UNKNOWN)
    if node.op != "call_function" or _draws(node.target):
        return _UNKNOWN
    args = [_evaluate(a, known, memo) for a in node.args]
    kwargs = {k: _evaluate(v, known, memo) for k, v in node.kwargs.items()}
    if any(a is _UNKNOWN for a in [*args, *kwargs.values()]):
        return _UNKNOWN
    try:
        with torch.no_grad():
            return node.target(*args, **kwargs)  # type: ignore[operator]
    except Exception:  # an op that does not run eagerly here: left to the refusal
        return _UNKNOWN


def _draws(target: Any) -> bool:
    """Random ops (their number is not fixed)."""
    return torch.Tag.nondeterministic_seeded in getattr(target, "tags", ())


__all__ = ["fold_constant_items"]
