"""Result types of NNEF expressions: literals are values, identifiers tensors or
attributes, invocations go to the document's fragments (a fragment with a body overrides
an operation of the same name, as in tract) and then to the operation table."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from t2n.backends.nnef.reader.infer_elementwise import binary_value, via_ir
from t2n.backends.nnef.reader.optable import (
    InferenceError,
    OpDef,
    ReadOps,
    ReadOpTable,
    TensorVal,
    Value,
    literal_tensor,
)
from t2n.backends.nnef.reader.tree import (
    BINARY_OPS,
    Array,
    Binary,
    Call,
    Dim,
    Expr,
    Fragment,
    Ident,
    Index,
    Literal,
    Slot,
    Tuple,
    Unary,
)
from t2n.ir import Sym
from t2n.registry import collect

PROPERTIES_FRAGMENT = "tract_core_properties"
"""tract's metadata fragment: not an operation."""


@functools.cache
def common_read_ops() -> ReadOps:
    """The operations of standard NNEF the reader knows: the ``COMMON`` table of every
    module of ``t2n.backends.nnef.reader`` (a target adds its dialect's, as
    ``t2n.backends.tract.reader.tract_read_ops`` does)."""
    return ReadOps.of(collect("t2n.backends.nnef.reader", "COMMON", ReadOpTable))


class Evaluator:
    """Evaluates expressions with the operations ``ops`` and the fragments of one
    document in reach."""

    def __init__(self, ops: ReadOps, fragments: Mapping[str, Fragment] | None = None,
                 symbols: Iterable[str] = ()) -> None:
        self.ops = ops
        self.fragments = dict(fragments or {})
        self.symbols = frozenset(symbols)

    def is_stateful(self, name: str) -> bool:
        op = self.ops.get(name)
        return op is not None and op.stateful

    def known_op(self, name: str) -> bool:
        frag = self.fragments.get(name)
        return (frag is not None and frag.body is not None) or name in self.ops

    # -- statements -----------------------------------------------------------------
    def results(self, rhs: Expr, count: int, slots: Sequence[TensorVal] = (),
                scope: Mapping[str, Value] | None = None) -> list[TensorVal]:
        """The ``count`` tensors an assignment's right-hand side gives."""
        v = self.value(rhs, scope or {}, slots)
        if count == 1:
            if isinstance(v, tuple) and len(v) == 1:
                v = v[0]
            return [self.as_tensor(v)]
        if not isinstance(v, (list, tuple)) or len(v) != count:
            raise InferenceError(f"the right-hand side gives {_count(v)} values for {count} names")
        return [self.as_tensor(x) for x in v]

    def as_tensor(self, v: Value) -> TensorVal:
        if isinstance(v, TensorVal):
            return v
        try:
            return literal_tensor(v)
        except (InferenceError, ValueError, TypeError):
            raise InferenceError(f"{v!r} is not a tensor") from None

    # -- expressions ----------------------------------------------------------------
    def value(self, e: Expr, scope: Mapping[str, Value], slots: Sequence[TensorVal] = ()) -> Value:
        if isinstance(e, Literal):
            return e.value
        if isinstance(e, Dim):
            return e.value
        if isinstance(e, Slot):
            return slots[e.index]
        if isinstance(e, Ident):
            if e.name in scope:
                return scope[e.name]
            if e.name in self.symbols:
                return Sym(e.name)
            raise InferenceError(f"unknown identifier {e.name!r}")
        if isinstance(e, Array):
            return [self.value(x, scope, slots) for x in e.items]
        if isinstance(e, Tuple):
            return tuple(self.value(x, scope, slots) for x in e.items)
        if isinstance(e, Call):
            out = self.call(e, scope, slots)
            return out[0] if len(out) == 1 else tuple(out)
        if isinstance(e, Binary):
            return self.binary(e.op, self.value(e.left, scope, slots), self.value(e.right, scope, slots))
        if isinstance(e, Unary):
            x = self.value(e.operand, scope, slots)
            if e.op == "+":
                return x
            if e.op == "-" and isinstance(x, (int, float, Sym)) and not isinstance(x, bool):
                return -x
            if e.op == "!" and isinstance(x, bool):
                return not x
            return via_ir("neg" if e.op == "-" else "not", [literal_tensor(x)])
        if isinstance(e, Index):
            return self.index(self.value(e.base, scope, slots), self.value(e.index, scope, slots))
        raise InferenceError(f"cannot evaluate {e!r}")

    def binary(self, op: str, x: Value, y: Value) -> Value:
        if _number(x) and _number(y):
            return _fold(op, x, y)
        return binary_value(BINARY_OPS[op], x, y)

    def index(self, base: Value, i: Value) -> Value:
        if isinstance(base, (list, tuple)) and isinstance(i, int):
            return base[i]
        if isinstance(base, TensorVal) and base.known is not None and isinstance(i, int):
            item = np.asarray(base.known)[i]
            return literal_tensor(item.tolist() if item.ndim else item.item(), base.dtype)
        raise InferenceError(f"cannot index {base!r} with {i!r}")

    def call(self, c: Call, scope: Mapping[str, Value], slots: Sequence[TensorVal]) -> list[TensorVal]:
        args = [self.value(x, scope, slots) for x in c.args]
        kwargs = {k: self.value(v, scope, slots) for k, v in c.kwargs}
        frag = self.fragments.get(c.name)
        if frag is not None and frag.body is not None:
            return list(self.fragment(frag, args, kwargs).values())
        op = self.ops.get(c.name)
        if op is None:
            raise InferenceError(f"unknown operation {c.name!r}")
        return self.run_op(op, args, kwargs, c.generic)

    def run_op(self, op: OpDef, args: Sequence[Value], kwargs: Mapping[str, Value],
               generic: str | None = None) -> list[TensorVal]:
        bound = op.bind(args, kwargs, generic)
        bound.context = self
        return list(op.infer(bound))

    # -- fragments ------------------------------------------------------------------
    def fragment(self, frag: Fragment, args: Sequence[Value], kwargs: Mapping[str, Value]) -> dict[str, TensorVal]:
        """The results of a call of ``frag``, by result name."""
        if len(args) > len(frag.params):
            raise InferenceError(f"{frag.name}: {len(args)} arguments for {len(frag.params)} parameters")
        scope: dict[str, Value] = {}
        for i, p in enumerate(frag.params):
            if i < len(args):
                scope[p.name] = args[i]
            elif p.name in kwargs:
                scope[p.name] = kwargs[p.name]
            elif p.default is not None:
                scope[p.name] = self.value(p.default, {})
            else:
                raise InferenceError(f"{frag.name}: parameter {p.name!r} is missing")
        return self.body(frag, scope)

    def run_fragment(self, name: str, params: Mapping[str, TensorVal]) -> dict[str, TensorVal]:
        """The results of fragment ``name`` with its parameters given by name (a scan body)."""
        frag = self.fragments.get(name)
        if frag is None or frag.body is None:
            raise InferenceError(f"no fragment {name!r} with a body in the document")
        missing = [p.name for p in frag.params if p.name not in params and p.default is None]
        if missing:
            raise InferenceError(f"{name}: no value for parameter(s) {', '.join(missing)}")
        scope: dict[str, Value] = {}
        for p in frag.params:
            if p.name in params:
                scope[p.name] = params[p.name]
            elif p.default is not None:
                scope[p.name] = self.value(p.default, {})
        return self.body(frag, scope)

    def body(self, frag: Fragment, scope: dict[str, Value]) -> dict[str, TensorVal]:
        assert frag.body is not None
        for stmt in frag.body:
            values = self.results(stmt.rhs, len(stmt.targets), scope=scope)
            for name, v in zip(stmt.targets, values):
                scope[name] = v
        out: dict[str, TensorVal] = {}
        for r in frag.results:
            if r.name not in scope:
                raise InferenceError(f"{frag.name}: result {r.name!r} is never assigned")
            out[r.name] = self.as_tensor(scope[r.name])
        return out


def _number(x: Value) -> bool:
    return isinstance(x, (int, float, Sym)) and not isinstance(x, bool)


def _fold(op: str, x: Value, y: Value) -> Value:
    """Arithmetic on literals and sizes (``S * 3``); ``/`` on integers rounds down."""
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if op == "/":
        return x / y if isinstance(x, float) or isinstance(y, float) else x // y
    if op == "^":
        return x**y
    if isinstance(x, Sym) or isinstance(y, Sym):
        raise InferenceError(f"cannot compare sizes {x} {op} {y} when the graph is read")
    return {"<": x < y, ">": x > y, "<=": x <= y, ">=": x >= y, "==": x == y, "!=": x != y}[op]


def _count(v: Value) -> int:
    return len(v) if isinstance(v, (list, tuple)) else 1
