"""Stable text form of a Graph, and a parser for it (used by pass tests).

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
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from t2n.errors import IRError
from t2n.ir.dims import Sym, parse_dim
from t2n.ir.dtypes import DType
from t2n.ir.graph import Graph, SourceLoc, Value
from t2n.ir.schema import OpSet
from t2n.ir.tensor_data import ArrayData, TensorData
from t2n.ir.types import Shape, TensorType

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


def print_graph(graph: Graph, *, with_locs: bool = False) -> str:
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


class IRParseError(IRError, ValueError):
    """The text is not a graph in the printed form."""


_TOKEN = re.compile(
    r'\s*(?:(?P<sym>sym"[^"]*")|(?P<str>"(?:[^"\\]|\\.)*")|(?P<dense>dense<[a-z0-9]+\[[^\]]*\]>)'
    r"|(?P<num>-?(?:inf|nan|\d+\.?\d*(?:e[-+]?\d+)?))|(?P<word>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<punct>[\[\],=]))"
)


def _parse_attr_value(text: str) -> Any:
    tokens = [m for m in _TOKEN.finditer(text) if m.group(0).strip()]
    pos = 0

    def value() -> Any:
        nonlocal pos
        m = tokens[pos]
        pos += 1
        kind = m.lastgroup
        tok = m.group(kind) if kind else ""
        if kind == "sym":
            return parse_dim(tok[4:-1])
        if kind == "str":
            return json.loads(tok)
        if kind == "num":
            if tok in ("inf", "-inf", "nan") or any(c in tok for c in ".e"):
                return float(tok)
            return int(tok)
        if kind == "word":
            if tok in ("true", "false"):
                return tok == "true"
            if tok == "none":
                return None
            return DType.parse(tok)
        if kind == "dense":
            ttype = TensorType.parse(tok[6:-1])
            values = None
            if pos < len(tokens) and tokens[pos].group(0).strip() == "[":
                values = value()
            return _dense(ttype, values)
        if tok == "[":
            items = []
            while tokens[pos].group(0).strip() != "]":
                items.append(value())
                if tokens[pos].group(0).strip() == ",":
                    pos += 1
            pos += 1
            return tuple(items)
        raise IRParseError(f"unexpected token {tok!r} in attribute {text!r}")

    out = value()
    if pos != len(tokens):
        raise IRParseError(f"trailing text in attribute {text!r}")
    return out


def _dense(ttype: TensorType, values: Any) -> TensorData:
    shape = tuple(int(d) for d in ttype.shape)
    dtype = ttype.dtype
    if values is None:
        return ArrayData(np.zeros(shape, dtype=dtype.numpy), dtype)
    flat = list(values)
    if any(isinstance(v, Sym) for v in flat):
        arr = np.empty(len(flat), dtype=object)
        arr[:] = flat
        return ArrayData(arr.reshape(shape), dtype)
    return ArrayData(np.asarray(flat, dtype=dtype.numpy).reshape(shape), dtype)


def _split_top(text: str, sep: str = ",") -> list[str]:
    parts, depth, cur, in_str = [], 0, "", False
    for ch in text:
        if ch == '"':
            in_str = not in_str
        if not in_str:
            if ch in "[({<":
                depth += 1
            elif ch in "])}>":
                depth -= 1
            elif ch == sep and depth == 0:
                parts.append(cur)
                cur = ""
                continue
        cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts]


_HEAD = re.compile(r"^graph\s+(\w+)\((.*)\)\s*->\s*\((.*)\)\s*\{$")
_LINE = re.compile(r"^(.*?)=\s*([A-Za-z_][\w.]*)\((.*?)\)(?:\s*\{(.*)\})?$")


def parse_graph(text: str, opset: OpSet | None = None) -> Graph:
    """Build a Graph from its printed form (types are re-inferred and must agree)."""
    lines = [ln.split("  #")[0].rstrip() for ln in text.strip().splitlines() if ln.strip()]
    head = _HEAD.match(lines[0].strip())
    if not head or lines[-1].strip() != "}":
        raise IRParseError("expected 'graph NAME(...) -> (...) {' ... '}'")
    graph = Graph(head.group(1), opset)
    env: dict[str, Value] = {}
    for item in _split_top(head.group(2)):
        name, typ = item.split(":", 1)
        v = graph.add_input(TensorType.parse(typ), name.strip().lstrip("%"))
        env[name.strip().lstrip("%")] = v
    for ln in lines[1:-1]:
        m = _LINE.match(ln.strip())
        if not m:
            raise IRParseError(f"cannot parse line {ln!r}")
        lhs, kind, args, attr_text = m.groups()
        outs = [p.split(":", 1) for p in _split_top(lhs)]
        inputs = [env[a.strip().lstrip("%")] for a in _split_top(args)]
        attrs: dict[str, Any] = {}
        for item in _split_top(attr_text or ""):
            key, text_value = item.split("=", 1)
            attrs[key.strip()] = _parse_attr_value(text_value)
        out_types = [TensorType.parse(t) for _, t in outs]
        op = graph.create_op(kind, inputs, attrs, names=[n.strip().lstrip("%") for n, _ in outs],
                             loc=SourceLoc())
        for v, t, (n, _) in zip(op.outputs, out_types, outs):
            if v.type != t:
                raise IRParseError(f"%{n.strip()}: declared {t} but {kind} infers {v.type}")
            env[n.strip().lstrip("%")] = v
    graph.set_outputs([env[o.strip().lstrip("%")] for o in _split_top(head.group(3))])
    return graph


__all__ = ["IRParseError", "Shape", "format_attrs", "parse_graph", "print_graph"]
