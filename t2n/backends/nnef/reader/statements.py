"""The IR ops of a graph read from NNEF: one op per assignment of ``graph.nnef``.

* ``nnef``: ``targets = expression;``. Attribute ``expr`` is the right-hand side as
  NNEF text whose operands are ``$0``, ``$1``... (the op's inputs, in order), so the
  statement renders back exactly as it was written; ``form`` says how the names are
  written (``one``, ``tuple`` or ``array``); ``fragments`` holds the text of every
  document fragment the expression calls (scan bodies too); ``quant`` the ``graph.quant``
  entry of each result ("" for none). Result types are inferred from the expression
  (:mod:`t2n.backends.nnef.reader.evaluate`), so passes see typed values.
* ``nnef_stateful``: the same, for expressions calling a stateful operation (a KV
  cache): never removed as dead.
* ``nnef_variable``: ``variable<generic>(shape, label)``, its tensor (lazily mapped)
  in ``data``.

Their emitters are in :mod:`t2n.backends.nnef.emit.nnef_statement`. The op set of a
read graph is the built-in one extended with these three, whose inference knows the
NNEF operations the graph was read with (:func:`read_op_set`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from t2n.backends.nnef.reader.evaluate import Evaluator
from t2n.backends.nnef.reader.optable import InferenceError, ReadOps, TensorVal
from t2n.backends.nnef.reader.parser import parse_expression, parse_fragment
from t2n.backends.nnef.reader.tree import (
    Dim,
    Expr,
    Fragment,
    Literal,
    fold_sizes,
    rebuild,
    to_text,
    walk,
)
from t2n.ir import Graph, OpSet
from t2n.ir.attributes import DATA, INT, SIZE, STR, STRS, optional, required, tuple_of
from t2n.ir.dims import substitute
from t2n.ir.schema import InferContext, OpTable, Trait
from t2n.ir.types import TensorType

STATEMENT_KINDS = ("nnef", "nnef_stateful")

STATEMENT_ATTRS = {"expr": required(STR), "count": optional(INT, 1), "form": optional(STR, "one"),
                   "fragments": optional(STRS, ()), "quant": optional(STRS)}


class NNEFExpr(str):
    """The ``expr`` attribute of a statement: its text, whose sizes over symbols can be
    substituted (the remodel passes rename and fix symbols through
    :meth:`with_symbols` without knowing NNEF)."""

    __slots__ = ()

    def symbols(self) -> frozenset[str]:
        out: frozenset[str] = frozenset()
        for e in walk(expression(self)):
            if isinstance(e, Dim):
                out |= e.value.symbols()
        return out

    def with_symbols(self, bindings: Mapping[str, Any]) -> NNEFExpr:
        """The text with each symbol of ``bindings`` replaced by its size or expression."""

        def sub(e: Expr) -> Expr | None:
            if not isinstance(e, Dim):
                return None
            v = substitute(e.value, bindings)
            return Literal(int(v)) if isinstance(v, int) else Dim(v)

        return NNEFExpr(to_text(rebuild(expression(self), sub)))


@functools.lru_cache(maxsize=1 << 16)
def expression(text: str) -> Expr:
    """The expression of an ``expr`` attribute (its operands are slots, so any other
    name in it is a symbol)."""
    return fold_sizes(parse_expression(text, "<IR nnef statement>"), lambda name: True)


@functools.lru_cache(maxsize=4096)
def fragment(text: str) -> Fragment:
    return parse_fragment(text, "<IR nnef fragment>")


def fragments_of(attrs: Mapping[str, Any]) -> dict[str, Fragment]:
    out: dict[str, Fragment] = {}
    for text in attrs.get("fragments", ()):
        f = fragment(text)
        out[f.name] = f
    return out


def statement_results(ops: ReadOps, types: Sequence[TensorType], attrs: Mapping[str, Any],
                      known: Sequence[np.ndarray | None]) -> list[TensorVal]:
    slots = [TensorVal(t, k) for t, k in zip(types, known)]
    ev = Evaluator(ops, fragments_of(attrs))
    return ev.results(expression(attrs["expr"]), int(attrs.get("count", 1)), slots)


_LAST = threading.local()
"""The last context evaluated on this thread: the graph asks for the types, then the
known values, of one op with the same context; a statement is evaluated once for both."""


def _as_array(k: Any) -> np.ndarray | None:
    """A known value as an array (numpy gives a bare object for a 0-d object result)."""
    if k is None or isinstance(k, np.ndarray):
        return k
    arr = np.empty((), dtype=object)
    arr[()] = k
    return arr


def _variable(ctx: InferContext) -> list[TensorType]:
    data = ctx.attrs["data"]
    return [TensorType(data.dtype, tuple(ctx.attrs["shape"]))]


def statement_table(ops: ReadOps) -> OpTable:
    """The IR ops of a graph read with the NNEF operations ``ops``."""
    table = OpTable("nnef")

    def results(ctx: InferContext) -> list[TensorVal]:
        last = getattr(_LAST, "entry", None)
        if last is not None and last[0] is ctx:
            return last[1]  # type: ignore[no-any-return]
        out = statement_results(ops, ctx.types, ctx.attrs, ctx.known)
        _LAST.entry = (ctx, out)
        return out

    def infer(ctx: InferContext) -> list[TensorType]:
        return [v.type for v in results(ctx)]

    def known(ctx: InferContext) -> list[np.ndarray | None]:
        try:
            return [_as_array(v.known) for v in results(ctx)]
        except InferenceError:
            return [None] * int(ctx.attrs.get("count", 1))

    table.op("nnef", known=known, attrs=STATEMENT_ATTRS, doc="An NNEF assignment read from graph.nnef (attrs "
                                                              "expr, count, form, fragments, quant).")(infer)
    table.op("nnef_stateful", traits=(Trait.STATEFUL,), known=known, attrs=STATEMENT_ATTRS,
             doc="An NNEF assignment calling a stateful operation.")(infer)
    table.op("nnef_variable", traits=(Trait.PURE, Trait.CONSTANT_LIKE),
             evaluate=lambda xs, a: [np.asarray(a["data"].values()).reshape(tuple(a["shape"]))],
             attrs={"data": required(DATA), "label": required(STR), "shape": required(tuple_of(SIZE)),
                    "generic": required(STR), "quant": optional(STRS)},
             doc="variable<generic>(shape, label) read from graph.nnef, its tensor in attr data.")(_variable)
    return table


def document_fragments(graph: Graph) -> dict[str, str]:
    """The fragments the statements of ``graph`` call, by name (their text)."""
    out: dict[str, str] = {}
    for op in graph.ops():
        for text in op.attrs.get("fragments", ()) if op.kind in STATEMENT_KINDS else ():
            out.setdefault(fragment(text).name, text)
    return out


@functools.cache
def read_op_set(ops: ReadOps) -> OpSet:
    """The op set of a graph read with the NNEF operations ``ops``."""
    return OpSet.default().extended(statement_table(ops))
