"""Reading a graph back from its printed form (:mod:`t2n.ir.printer`), for pass tests:
IR text in, IR text out."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from t2n.errors import IRError
from t2n.ir.dims import Sym, parse_dim
from t2n.ir.dtypes import DType
from t2n.ir.graph import Graph
from t2n.ir.nodes import SourceLoc, Value
from t2n.ir.schema import OpSet
from t2n.ir.tensor_data import ArrayData, TensorData
from t2n.ir.types import TensorType


class IRParseError(IRError, ValueError):
    """The text is not a graph in the printed form."""


_TOKEN = re.compile(
    r'\s*(?:(?P<sym>sym"[^"]*")|(?P<str>"(?:[^"\\]|\\.)*")|(?P<dense>dense<[a-z0-9]+\[[^\]]*\]>)'
    r"|(?P<num>-?(?:inf|nan|\d+\.?\d*(?:e[-+]?\d+)?))|(?P<word>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<punct>[\[\],=]))"
)


def _parse_attr_value(text: str) -> Any:
    """One attribute value as printed: a scalar, a dense tensor or a list of values."""
    tokens = [m for m in _TOKEN.finditer(text) if m.group(0).strip()]
    pos = 0

    def value() -> Any:
        nonlocal pos
        m = tokens[pos]
        pos += 1
        kind = m.lastgroup
        tok = m.group(kind) if kind else ""
        if kind in ("sym", "str", "num", "word"):
            return _scalar(kind, tok)
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


def _scalar(kind: str, tok: str) -> Any:
    """The value of one scalar token: a symbolic size, a string, a number, a boolean,
    ``none`` or a dtype."""
    if kind == "sym":
        return parse_dim(tok[4:-1])
    if kind == "str":
        return json.loads(tok)
    if kind == "num":
        if tok in ("inf", "-inf", "nan") or any(c in tok for c in ".e"):
            return float(tok)
        return int(tok)
    if tok in ("true", "false"):
        return tok == "true"
    if tok == "none":
        return None
    return DType.parse(tok)


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


__all__ = ["IRParseError", "parse_graph"]
