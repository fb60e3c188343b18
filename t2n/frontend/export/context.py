"""The lowering context for an FX node of an ExportedProgram.

The rules in ``t2n.frontend.lowering`` read their arguments through
:class:`~t2n.frontend.context.LoweringContext` by schema name or position; this
subclass serves those reads from the FX node instead of a TorchScript node. Every
argument of the op's schema is present (positional, keyword, or the schema's
default), as in a TorchScript node, so rules that look at ``n_inputs`` see the same
count. Tensor arguments are the IR values already lowered for their FX nodes.
"""

from __future__ import annotations

import builtins
import os
import re
from typing import Any, Protocol

import torch
import torch.fx

from t2n.frontend.context import GraphLowering, LoweringContext, UnsupportedHere
from t2n.frontend.dtypes import to_ir
from t2n.ir import Builder, DType, SourceLoc


class ProgramLoweringState(GraphLowering, Protocol):
    """The export frontend's lowering (:class:`t2n.frontend.export.lower.ProgramLowering`)
    as its rule context reads it."""

    def schema_args(self, node: torch.fx.Node, schema: torch.FunctionSchema | None) -> list[Any]: ...

_MISSING = object()


class FxLoweringContext(LoweringContext):
    """Arguments and helpers for one FX ``call_function`` node (see the base class)."""

    def __init__(self, lowering: ProgramLoweringState, node: torch.fx.Node, kind: str,
                 schema: torch.FunctionSchema | None) -> None:
        # The base initialiser reads a TorchScript node; set the same fields from FX.
        self.lowering = lowering  # type: ignore[assignment]
        self.node = node  # type: ignore[assignment]
        self.fx_node = node
        self.kind = kind
        self.loc = fx_source_loc(node, kind)
        self.b = Builder(lowering.graph, self.loc)
        self._schema = schema
        self._names = [a.name for a in schema.arguments] if schema is not None else ["self", "other"]
        self._inputs = lowering.schema_args(node, schema)

    @property
    def n_inputs(self) -> builtins.int:
        return len(self._inputs)

    @property
    def n_outputs(self) -> builtins.int:
        return len(self._schema.returns) if self._schema is not None else 1

    def raw(self, key: builtins.int | str) -> Any:
        return self._inputs[self.index(key)]

    def draw_key(self) -> Any:
        return self.fx_node.name

    def torch_value(self, key: builtins.int | str) -> torch._C.Value:
        raise UnsupportedHere(f"{self.kind}: this rule reads TorchScript values; export with frontend=\"jit\"")

    def traced_dtype(self, k: builtins.int = 0) -> DType | None:
        val = _output_meta(self.fx_node, k)
        return to_ir(val.dtype) if isinstance(val, torch.Tensor) else None

    def traced_shape(self, k: builtins.int = 0) -> list[builtins.int] | None:
        val = _output_meta(self.fx_node, k)
        if isinstance(val, torch.Tensor) and all(isinstance(d, int) for d in val.shape):
            return [int(d) for d in val.shape]
        return None


def _output_meta(node: torch.fx.Node, k: int) -> Any:
    val = node.meta.get("val")
    if isinstance(val, (tuple, list)):
        return val[k] if k < len(val) else None
    return val if k == 0 else None


def fx_module_path(node: torch.fx.Node) -> str:
    """The dotted path of the innermost module whose call made ``node`` (``""`` for the
    top-level module), from torch.export's ``nn_module_stack``."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = str(list(stack.values())[-1][0])
    path = re.sub(r"^L\['self'\]\.?", "", path)
    return re.sub(r"\._modules\['([^']*)'\]|\[(\d+)\]", lambda m: "." + (m.group(1) or m.group(2)), path)


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_TORCH_DIR = os.path.dirname(torch.__file__)
_T2N_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fx_source(node: torch.fx.Node) -> str:
    """The innermost frame of the user's code that made ``node`` (``file.py(12): forward``),
    from torch.export's ``stack_trace``, in the jit frontend's form."""
    frames = _FRAME.findall(str(node.meta.get("stack_trace") or ""))
    for path, line, fn in reversed(frames):
        if not path.startswith((_TORCH_DIR, _T2N_DIR)) and "/transformers/utils/" not in path:
            return f"{path}({line}): {fn}"[:200]
    if frames:
        path, line, fn = frames[-1]
        return f"{path}({line}): {fn}"[:200]
    return ""


def fx_source_loc(node: torch.fx.Node, kind: str) -> SourceLoc:
    return SourceLoc(module=fx_module_path(node), aten=kind, source=fx_source(node))
