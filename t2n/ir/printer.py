"""Stable text form of a Graph (:mod:`t2n.ir.parser` reads it back; pass tests use both).

    graph main(%x: f32[1, 3]) -> (%y) {
      %w: f32[3, 4] = variable() {data=dense<f32[3, 4]>, label="w"}
      %y: f32[1, 4] = matmul(%x, %w) {transpose_a=false, transpose_b=false}
    }

Attributes print sorted by key. Constants up to ``INLINE_ELEMENTS`` print their
values (``dense<i64[2]>[1, -1]``); larger constants and all variables (weights) print
their type only and parse back as zeros. Symbolic dims print as ``sym"2 * S"``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import numpy as np

from t2n.ir.dims import Sym
from t2n.ir.dtypes import DType
from t2n.ir.nodes import Op, Value
from t2n.ir.tensor_data import ArrayData, TensorData

INLINE_ELEMENTS = 16


def format_scalar(x: Any) -> str:
    if isinstance(x, (bool, np.bool_)):
        return "true" if x else "false"
    if isinstance(x, Sym):
        return f'sym"{x}"'
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, (float, np.floating)):
        f = float(x)
        if math.isnan(f):
            return "nan"
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        return repr(f)
    raise TypeError(f"cannot print {x!r}")


def format_attr(value: Any, inline: bool = True) -> str:
    if isinstance(value, TensorData):
        head = f"dense<{value.dtype}{list(value.shape)}>".replace("'", "")
        if inline and value.numel <= INLINE_ELEMENTS and not (
            isinstance(value, ArrayData) and value.numel == 0
        ):
            flat = np.asarray(value.values()).reshape(-1).tolist()
            return head + "[" + ", ".join(format_scalar(v) for v in flat) + "]"
        return head
    if isinstance(value, DType):
        return value.value
    if isinstance(value, str):
        return json.dumps(value)
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_attr(v) for v in value) + "]"
    return format_scalar(value)


def format_attrs(attrs: Mapping[str, Any], inline: bool = True) -> str:
    if not attrs:
        return ""
    return " {" + ", ".join(f"{k}={format_attr(attrs[k], inline)}" for k in sorted(attrs)) + "}"


class PrintableGraph(Protocol):
    """What the printer reads of a :class:`~t2n.ir.graph.Graph`."""

    @property
    def name(self) -> str: ...

    @property
    def inputs(self) -> tuple[Value, ...]: ...

    @property
    def outputs(self) -> tuple[Value, ...]: ...

    def ops(self) -> Iterable[Op]: ...


def print_graph(graph: PrintableGraph, *, with_locs: bool = False) -> str:
    """The graph as stable text (same graph, same text)."""
    ins = ", ".join(f"%{v.name}: {v.type}" for v in graph.inputs)
    outs = ", ".join(f"%{v.name}" for v in graph.outputs)
    lines = [f"graph {graph.name}({ins}) -> ({outs}) {{"]
    for op in graph.ops():
        lhs = ", ".join(f"%{v.name}: {v.type}" for v in op.outputs)
        args = ", ".join(f"%{v.name}" for v in op.inputs)
        line = f"  {lhs} = {op.kind}({args}){format_attrs(op.attrs, inline=op.kind != 'variable')}"
        if with_locs and (op.loc.module or op.loc.aten):
            line += f"  # {op.loc}"
        lines.append(line)
    lines.append("}")
    return "\n".join(lines) + "\n"


__all__ = ["PrintableGraph", "format_attrs", "print_graph"]
