"""An NNEF document (and its tensors) as an IR graph, the inverse of the renderer.

Inputs are the ``external`` / ``tract_core_external`` declarations, in the order they
appear (tract's order); variables are ``nnef_variable`` ops holding their tensor; every
other assignment is one ``nnef`` op whose operands are the tensors its right-hand side
names (see :mod:`t2n.backends.nnef.reader.statements`). The document's other facts go
where the renderer takes them from: properties to ``graph.info.properties``,
``tract_assert`` and unknown extension lines to ``graph.info.custom_extensions`` (a symbol
no assertion bounds gets ``S >= 0``, which is always true, so that rendering adds no
``S >= 1`` the document did not say), registries and symbols are written again from the
operations and the types, fragments by the statements that call them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

from t2n.backends.nnef.reader.evaluate import PROPERTIES_FRAGMENT, Evaluator
from t2n.backends.nnef.reader.optable import InferenceError, ReadOps, parse_dtype
from t2n.backends.nnef.reader.parser import parse_quant
from t2n.backends.nnef.reader.statements import NNEFExpr, read_op_set
from t2n.backends.nnef.reader.tree import (
    Array,
    Assignment,
    Binary,
    Call,
    Dim,
    Document,
    Expr,
    Fragment,
    Ident,
    Literal,
    Slot,
    Tuple,
    Unary,
    calls,
    rebuild,
    size_value,
    to_text,
    walk,
)
from t2n.errors import NNEFReadError
from t2n.ir import DType, Graph, Shape, Sym, TensorData, TensorType, Value
from t2n.ir.dims import valid_symbol_name

EXTERNALS = ("external", "tract_core_external")
_STD_TYPES = {"scalar": DType.F32, "integer": DType.I64, "logical": DType.BOOL, None: DType.F32}


@attrs.frozen
class ReadFacts:
    """What the document said beyond its graph: its dialect and extension lines."""

    dialect: str
    """``tract`` (tract extensions, operations or properties) or ``khronos``."""
    registries: tuple[str, ...]
    symbols: tuple[str, ...]
    assertions: tuple[str, ...]
    other_extensions: tuple[str, ...]


def classify_extensions(lines: Iterable[str]) -> tuple[list[str], list[str], list[str], list[str]]:
    """(registries, symbols, assertions, other lines) of a document's extension lines."""
    regs, syms, asserts, other = [], [], [], []
    for line in lines:
        head, _, rest = line.partition(" ")
        if head == "tract_registry":
            regs.append(rest.strip())
        elif head == "tract_symbol":
            syms.append(rest.strip())
        elif head == "tract_assert":
            asserts.append(line)
        elif not head.startswith("KHR_"):
            other.append(line)
    return regs, syms, asserts, other


def _properties(frag: Fragment) -> dict[str, Any]:
    if not frag.body or not isinstance(frag.body[0].rhs, Array):
        return {}
    out: dict[str, Any] = {}
    for item in frag.body[0].rhs.items:
        if isinstance(item, Tuple) and len(item.items) == 2 and isinstance(item.items[0], Literal):
            out[str(item.items[0].value)] = _literal_value(item.items[1])
    return out


def _literal_value(e: Expr) -> Any:
    if isinstance(e, Literal):
        return e.value
    if isinstance(e, Array):
        return [_literal_value(x) for x in e.items]
    if isinstance(e, Tuple):
        return tuple(_literal_value(x) for x in e.items)
    return to_text(e)


class GraphBuilder:
    """Builds the IR graph of one document (see the module docstring)."""

    def __init__(self, doc: Document, ops: ReadOps, tensor: Callable[[str], TensorData],
                 quant_text: str | None, source: str) -> None:
        self.doc = doc
        self.tensor = tensor
        self.source = source
        self.fragments = {f.name: f for f in doc.fragments if f.name != PROPERTIES_FRAGMENT}
        regs, syms, asserts, other = classify_extensions(doc.extensions)
        self.symbols = set(syms) | self._external_symbols()
        tract = bool(regs or syms or asserts) or any(f.name == PROPERTIES_FRAGMENT for f in doc.fragments) \
            or any(c.name.startswith("tract_") for a in doc.graph.body for c in calls(a.rhs))
        self.facts = ReadFacts("tract" if tract else "khronos", tuple(regs), tuple(sorted(self.symbols)),
                               tuple(asserts), tuple(other))
        self.quant = {k: to_text(v) for k, v in parse_quant(quant_text, f"{source}/graph.quant").items()} \
            if quant_text else {}
        self.evaluator = Evaluator(ops, self.fragments, self.symbols)
        self.values: dict[str, Value] = {}
        self.problems: list[str] = []

    def _external_symbols(self) -> set[str]:
        """Names used in ``external`` shapes without a declaration (tract makes them symbols)."""
        found: set[str] = set()
        for a in self.doc.graph.body:
            if isinstance(a.rhs, Call) and a.rhs.name in EXTERNALS:
                shape = a.rhs.kwarg("shape")
                for c in [shape] if shape is not None else []:
                    found |= {e.name for e in _idents(c) if valid_symbol_name(e.name)}
        return found

    # -- the graph --------------------------------------------------------------------
    def build(self) -> Graph:
        self._check_operations()
        g = self.doc.graph
        graph = Graph(g.name, read_op_set(self.evaluator.ops))
        for stmt in g.body:
            try:
                self._statement(graph, stmt)
            except InferenceError as exc:
                raise NNEFReadError(f"{self.source}: graph.nnef cannot be read into the IR: "
                                    f"`{_stmt_text(stmt)}`: {exc}") from None
        missing = [n for n in g.outputs if n not in self.values]
        self.problems += [f"output {n!r} is never assigned" for n in missing]
        unused = sorted(set(self.quant) - set(self.values))
        self.problems += [f"graph.quant names {n!r}, which graph.nnef does not define" for n in unused]
        if self.problems:
            raise NNEFReadError(f"{self.source}: graph.nnef cannot be read into the IR:", self.problems)
        graph.set_outputs([self.values[n] for n in g.outputs])
        inputs = tuple(v.name for v in graph.inputs)
        graph.info.input_names = inputs
        graph.info.output_names = tuple(g.outputs)
        graph.info.same_io_names = tuple(n for n in g.outputs if n in inputs)
        self._facts_to_info(graph)
        return graph

    def _check_operations(self) -> None:
        """Every operation the document calls and t2n does not know, at once."""
        unknown: dict[str, int] = {}
        bodies = [a.rhs for a in self.doc.graph.body]
        bodies += [a.rhs for f in self.fragments.values() for a in f.body or ()]
        local = {"external", "variable", "tract_core_external"}
        for rhs in bodies:
            for c in calls(rhs):
                if c.name not in local and not self.evaluator.known_op(c.name):
                    unknown[c.name] = unknown.get(c.name, 0) + 1
        if unknown:
            raise NNEFReadError(
                f"{self.source}: graph.nnef calls operations t2n does not know (they have no "
                "inference of their result types), so it cannot be read into the IR:",
                [f"{name} ({n} call{'s' if n > 1 else ''})" for name, n in sorted(unknown.items())])

    def _statement(self, graph: Graph, stmt: Assignment) -> None:
        rhs = stmt.rhs
        if isinstance(rhs, Call) and rhs.name in EXTERNALS and len(stmt.targets) == 1:
            self._external(graph, stmt.targets[0], rhs)
            return
        if isinstance(rhs, Call) and rhs.name == "variable" and len(stmt.targets) == 1:
            self._variable(graph, stmt.targets[0], rhs)
            return
        for t in stmt.targets:
            if t in self.values:
                raise InferenceError(f"{t!r} is assigned twice")
        operands: list[Value] = []
        template = rebuild(rhs, lambda e: self._resolve(e, operands))
        names = list(calls(template))
        attrs_: dict[str, Any] = {"expr": NNEFExpr(to_text(template)), "count": len(stmt.targets), "form": stmt.form}
        frags = self._fragments_used(template)
        if frags:
            attrs_["fragments"] = tuple(f.text for f in frags)
        quant = tuple(self.quant.get(t, "") for t in stmt.targets)
        if any(quant):
            attrs_["quant"] = quant
        kind = "nnef_stateful" if any(self.evaluator.is_stateful(c.name) for c in names) else "nnef"
        op = graph.create_op(kind, operands, attrs_, names=list(stmt.targets))
        for t, v in zip(stmt.targets, op.outputs):
            self.values[t] = v

    def _resolve(self, e: Expr, operands: list[Value]) -> Expr | None:
        """A tensor name becomes an operand slot, a symbol a size; sizes fold."""
        if isinstance(e, Ident):
            if e.name in self.values:
                v = self.values[e.name]
                if v not in operands:
                    operands.append(v)
                return Slot(operands.index(v))
            if e.name in self.symbols:
                return Dim(Sym(e.name))
            raise InferenceError(f"{e.name!r} is used before it is assigned")
        if isinstance(e, (Binary, Unary)):
            value = size_value(e, self.symbols.__contains__)
            if value is not None and any(isinstance(x, Ident) for x in walk(e)):
                return Dim(value) if isinstance(value, Sym) else Literal(int(value))
        return None

    def _fragments_used(self, e: Expr) -> list[Fragment]:
        """The document fragments ``e`` calls (scan bodies too), each before those it calls."""
        out: dict[str, Fragment] = {}

        def visit(expr: Expr) -> None:
            for c in calls(expr):
                names = [c.name]
                body = c.kwarg("body")
                if c.name == "tract_core_scan" and isinstance(body, Literal) and isinstance(body.value, str):
                    names.append(body.value)
                for n in names:
                    f = self.fragments.get(n)
                    if f is not None and n not in out:
                        out[n] = f
                        for a in f.body or ():
                            visit(a.rhs)

        visit(e)
        return list(out.values())

    def _external(self, graph: Graph, name: str, call: Call) -> None:
        shape = self._shape(call.kwarg("shape") or (call.args[0] if call.args else Array(())))
        if call.name == "tract_core_external":
            dt = call.kwarg("datum_type")
            if not isinstance(dt, Literal) or not isinstance(dt.value, str):
                raise InferenceError("tract_core_external needs a datum_type string")
            dtype = parse_dtype(dt.value, "tract_core_external")
        elif call.generic in _STD_TYPES:
            dtype = _STD_TYPES[call.generic]
        else:
            raise InferenceError(f"external<{call.generic}> is not a tensor type")
        if name in self.quant:
            raise InferenceError(f"graph.quant quantizes the input {name!r}; quantized inputs are not read")
        v = graph.add_input(TensorType(dtype, Shape(shape)), name)
        self.values[name] = v

    def _shape(self, e: Expr) -> list[Any]:
        value = self.evaluator.value(rebuild(e, lambda x: Dim(Sym(x.name)) if isinstance(x, Ident) and
                                             x.name in self.symbols else None), {})
        if not isinstance(value, list):
            raise InferenceError(f"a shape must be an array, got {to_text(e)}")
        return value

    def _variable(self, graph: Graph, name: str, call: Call) -> None:
        label_e, shape_e = call.kwarg("label"), call.kwarg("shape")
        if not isinstance(label_e, Literal) or not isinstance(label_e.value, str) or shape_e is None:
            raise InferenceError("a variable needs a label string and a shape")
        label = label_e.value.lstrip("/")
        shape = self._shape(shape_e)
        try:
            data = self.tensor(label)
        except KeyError:
            raise InferenceError(f"variable {name!r}: the artifact has no tensor file {label}.dat") from None
        if tuple(data.shape) != tuple(shape):
            raise InferenceError(f"variable {name!r} is declared {list(shape)} but {label}.dat holds "
                                 f"{list(data.shape)}")
        attrs_: dict[str, Any] = {"data": data, "label": label, "shape": tuple(shape), "generic": call.generic}
        if name in self.quant:
            attrs_["quant"] = (self.quant[name],)
        op = graph.create_op("nnef_variable", [], attrs_, names=[name])
        self.values[name] = op.output

    # -- the rest of the document ---------------------------------------------------
    def _facts_to_info(self, graph: Graph) -> None:
        facts = self.facts
        if facts.dialect != "tract":
            return
        props = next((f for f in self.doc.fragments if f.name == PROPERTIES_FRAGMENT), None)
        if props is not None:
            graph.info.properties = _properties(props)
        custom = list(facts.assertions)
        bounded = {s for s in self.symbols for a in facts.assertions
                   if a.replace(" ", "").startswith(f"tract_assert{s}>=")}
        used = frozenset().union(*(v.symbols() for v in graph.values()))
        custom += [f"tract_assert {s} >= 0" for s in sorted(used - bounded)]
        graph.info.custom_extensions = custom + list(facts.other_extensions)


def _idents(e: Expr) -> list[Ident]:
    return [x for x in walk(e) if isinstance(x, Ident)]


def _stmt_text(stmt: Assignment) -> str:
    lhs = stmt.targets[0] if stmt.form == "one" else "(" + ", ".join(stmt.targets) + ")"
    text = f"{lhs} = {to_text(stmt.rhs)};"
    return text if len(text) < 160 else text[:157] + "..."
