"""Tracing models quantized with ``torch.ao.quantization`` (eager or FX, static or dynamic).

Their quantized convolutions and linears keep weights in packed-parameter objects
(``torch.ScriptObject``), which the direct trace of :mod:`t2n.frontend.trace` cannot
record: those models are traced with ``torch.jit.trace``, whose graph reads the packed
parameters through ``prim::GetAttr`` (the lowering unpacks them). The model is not changed.

PyTorch runs some float ops (``relu``, ``sigmoid``, ``hardtanh``, ``mean``…) on quantized
tensors with quantized semantics. After tracing, every ``aten::`` node that reads a
quantized tensor and is not a pure shape/layout op is renamed ``quantized::<op>``, so
that it reaches the quantized rule of that op (``t2n/frontend/lowering/quantized.py``)
or is reported as unsupported under a name that says it is the quantized form.
"""

from __future__ import annotations

from typing import Any

import torch

from t2n.errors import TraceError
from t2n.frontend import torch_private
from t2n.frontend.io import FlatModule, flatten

QUANTIZED_SCALARS = frozenset({"QUInt8", "QInt8", "QInt32", "QUInt4x2", "QUInt2x4"})

LAYOUT_OPS = frozenset({
    "aten::flatten", "aten::reshape", "aten::view", "aten::permute", "aten::transpose",
    "aten::contiguous", "aten::squeeze", "aten::unsqueeze", "aten::size", "aten::slice",
    "aten::select", "aten::dequantize", "aten::dim", "aten::numel", "aten::t",
    "prim::ListConstruct", "prim::TupleConstruct", "prim::ListUnpack", "prim::TupleUnpack",
    "prim::GetAttr", "prim::Constant", "aten::chunk", "aten::split", "aten::unbind",
})
"""Ops whose result on a quantized tensor is its integers moved around, scale and zero
point kept: the float rules give the right integers."""


def holds_packed_params(model: torch.nn.Module) -> bool:
    """Whether ``model`` (or a submodule) keeps quantized weights in packed-parameter objects."""
    return any(
        isinstance(v, torch.ScriptObject) for m in model.modules() for v in vars(m).values()
    )


def is_quantized_value(v: torch._C.Value) -> bool:
    t = v.type()
    return isinstance(t, torch._C.TensorType) and str(t.scalarType()) in QUANTIZED_SCALARS


def _reads_quantized(node: torch._C.Node) -> bool:
    for v in node.inputs():
        if is_quantized_value(v):
            return True
        producer = v.node()
        if producer.kind() == "prim::ListConstruct" and any(is_quantized_value(x) for x in producer.inputs()):
            return True
    return False


def mark_quantized_forms(graph: torch._C.Graph) -> int:
    """Rename each ``aten::`` node that computes on a quantized tensor to
    ``quantized::<op>``; returns how many were renamed."""
    renamed = 0
    for node in list(graph.nodes()):
        kind = node.kind()
        if not kind.startswith("aten::") or kind in LAYOUT_OPS or not _reads_quantized(node):
            continue
        name = kind.removeprefix("aten::").rstrip("_")
        new = graph.create(f"quantized::{name}", list(node.inputs()), node.outputsSize())
        new.copyMetadata(node)
        new.insertBefore(node)
        for old_out, new_out in zip(node.outputs(), new.outputs()):
            new_out.setType(old_out.type())
            old_out.replaceAllUsesWith(new_out)
        node.destroy()
        renamed += 1
    return renamed


def jit_trace_flat(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[
        FlatModule, torch._C.Graph, list[torch.Tensor], list[str], list[torch.Tensor]]:
    """``torch.jit.trace`` of the model's flat-tensor wrapper: the wrapper, the inlined
    graph (first input: the wrapper), the example tensors, their paths, the outputs."""
    tensors, paths, spec = flatten((args, kwargs))
    flat = FlatModule(model, spec)
    with torch.no_grad():
        outputs = list(flat(*tensors))
        try:
            traced: Any = torch.jit.trace(flat, tuple(tensors), check_trace=False, strict=False)
        except Exception as exc:
            raise TraceError(f"torch.jit.trace failed on the quantized model: "
                             f"{type(exc).__name__}: {exc}") from exc
    graph = traced.inlined_graph
    torch_private.dead_code_elimination(graph)
    mark_quantized_forms(graph)
    return flat, graph, tensors, paths, outputs
