"""NNEF operations the reader knows: their signature (parameters and defaults, as NNEF
declares them) and how their result types follow from their arguments.

An inference function receives bound :class:`Args` (tensors as :class:`TensorVal`,
attributes as Python values) and returns one :class:`TensorVal` per result. Where an
NNEF operation is the form of an IR op (``add``, ``tract_core_erf``...), the inference
is the IR op's own (see :mod:`t2n.backends.nnef.reader.infer_elementwise`): the reader
and the renderer share the IR's op table and the emitters' name tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from t2n.backends.nnef.reader.tree import Array, Expr, Literal, Tuple
from t2n.errors import NNEFReadError
from t2n.ir import DType, Shape, Sym, TensorType
from t2n.ir.dims import Dim
from t2n.registry import Registry, Table, entries_of


@attrs.frozen
class TensorVal:
    """A tensor during inference: its type and, for small integer tensors computed from
    literals or shapes, its value (an array that may hold :class:`Sym` sizes)."""

    type: TensorType
    known: np.ndarray | None = attrs.field(default=None, eq=False)

    @property
    def shape(self) -> Shape:
        return self.type.shape

    @property
    def dtype(self) -> DType:
        return self.type.dtype

    @property
    def rank(self) -> int:
        return len(self.type.shape)


Value = Any
"""A tensor (:class:`TensorVal`), or an attribute: bool, int, float, str, :class:`Sym`,
and lists or tuples of them."""


class InferenceError(NNEFReadError, ValueError):
    """An operation's arguments do not fit its definition (types, ranks, attributes)."""


_REQUIRED = object()


def literal_tensor(value: Value, like: DType | None = None) -> TensorVal:
    """A literal used where a tensor is expected: ``1.0`` is an f32 scalar, ``1`` an i64
    one, ``true`` a bool, a nested list a constant tensor; ``like`` is the dtype of the
    other operand (a literal adopts it, as tract does)."""
    if isinstance(value, TensorVal):
        return value
    arr = np.asarray(value, dtype=object) if _has_sym(value) else np.asarray(value)
    if arr.dtype == object:
        dtype = DType.I64
    elif arr.dtype == np.bool_:
        dtype = DType.BOOL
    elif np.issubdtype(arr.dtype, np.integer):
        dtype = like if like is not None and like is not DType.BOOL else DType.I64
    elif np.issubdtype(arr.dtype, np.floating):
        dtype = like if like is not None and like.is_float else DType.F32
    else:
        raise InferenceError(f"{value!r} is not a tensor")
    known = None
    if not dtype.is_float:
        known = arr if arr.dtype == object else arr.astype(dtype.numpy)
    return TensorVal(TensorType(dtype, Shape(arr.shape)), known)


def _has_sym(value: Value) -> bool:
    if isinstance(value, Sym):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_sym(v) for v in value)
    return False


class Args:
    """The arguments of one call, by parameter name."""

    def __init__(self, op: str, values: Mapping[str, Value], generic: str | None = None) -> None:
        self.op = op
        self.values = dict(values)
        self.generic = generic
        """The call's generic type (``cast<scalar>``), if any."""
        self.context: Any = None
        """The evaluator running the call (a scan asks it for its body fragment)."""

    def __contains__(self, name: str) -> bool:
        return name in self.values

    def raw(self, name: str) -> Value:
        return self.values[name]

    def fail(self, why: str) -> InferenceError:
        return InferenceError(f"{self.op}: {why}")

    def tensor(self, name: str, like: DType | None = None) -> TensorVal:
        v = self.values[name]
        if isinstance(v, TensorVal):
            return v
        try:
            return literal_tensor(v, like)
        except InferenceError:
            raise self.fail(f"argument {name} = {v!r} is not a tensor") from None

    def tensors(self, name: str) -> list[TensorVal]:
        v = self.values[name]
        if not isinstance(v, (list, tuple)):
            raise self.fail(f"argument {name} must be an array of tensors")
        first = next((x.dtype for x in v if isinstance(x, TensorVal)), None)
        return [x if isinstance(x, TensorVal) else literal_tensor(x, first) for x in v]

    def integer(self, name: str) -> int:
        v = self.values[name]
        if isinstance(v, TensorVal):
            v = _known_scalar(v)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise self.fail(f"argument {name} must be an integer, got {v!r}")
        return int(v)

    def dim(self, name: str) -> Dim:
        v = self.values[name]
        if isinstance(v, TensorVal):
            v = _known_scalar(v)
        if isinstance(v, Sym):
            return v
        return self.integer(name)

    def dims(self, name: str) -> list[Dim]:
        v = self.values[name]
        if isinstance(v, TensorVal):
            if v.known is None:
                raise self.fail(f"argument {name} must be known when the graph is read")
            v = np.asarray(v.known).reshape(-1).tolist()
        if not isinstance(v, (list, tuple)):
            v = [v]
        out: list[Dim] = []
        for d in v:
            if isinstance(d, TensorVal):  # a size computed in the expression: min(16, T)
                d = _known_scalar(d)
            if isinstance(d, Sym):
                out.append(d)
            elif isinstance(d, (int, np.integer)) and not isinstance(d, bool):
                out.append(int(d))
            else:
                raise self.fail(f"argument {name} must hold sizes, got {v!r}")
        return out

    def ints(self, name: str) -> list[int]:
        out = self.dims(name)
        if any(isinstance(d, Sym) for d in out):
            raise self.fail(f"argument {name} must hold integers, got {out}")
        return [int(d) for d in out]

    def number(self, name: str) -> float:
        v = self.values[name]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.fail(f"argument {name} must be a number, got {v!r}")
        return float(v)

    def flag(self, name: str) -> bool:
        v = self.values[name]
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            return bool(v)
        if not isinstance(v, bool):
            raise self.fail(f"argument {name} must be true or false, got {v!r}")
        return v

    def text(self, name: str) -> str:
        v = self.values[name]
        if not isinstance(v, str):
            raise self.fail(f"argument {name} must be a string, got {v!r}")
        return v

    def pairs(self, name: str) -> list[tuple[int, int]]:
        v = self.values[name]
        if not isinstance(v, (list, tuple)) or not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in v):
            raise self.fail(f"argument {name} must be a list of (before, after) pairs, got {v!r}")
        return [(int(p[0]), int(p[1])) for p in v]

    def dtype(self, name: str) -> DType:
        return parse_dtype(self.text(name), self.op)


def _known_scalar(v: TensorVal) -> Value:
    if v.known is None or np.asarray(v.known).size != 1:
        return v
    return np.asarray(v.known).reshape(-1).tolist()[0]


_DTYPE_ALIASES = {"tdim": DType.I64, "f16": DType.F16, "f32": DType.F32, "f64": DType.F64,
                  "bool": DType.BOOL}


def parse_dtype(text: str, op: str = "") -> DType:
    """A tract datum type name (``f16``, ``F32``, ``i64``, ``TDim``...) as a DType."""
    key = text.strip().lower()
    if key in _DTYPE_ALIASES:
        return _DTYPE_ALIASES[key]
    try:
        return DType.parse(key)
    except Exception:
        raise InferenceError(f"{op}: datum type {text!r} is not one t2n reads "
                             "(quantized types such as QI8(...) are not)") from None


Infer = Callable[[Args], Sequence[TensorVal]]


@attrs.frozen
class OpDef:
    """One NNEF operation: parameters with defaults, inference, and what it needs."""

    name: str
    params: tuple[tuple[str, Any], ...]
    infer: Infer
    stateful: bool = False

    def bind(self, args: Sequence[Value], kwargs: Mapping[str, Value], generic: str | None = None) -> Args:
        names = [p for p, _ in self.params]
        if len(args) > len(names):
            raise InferenceError(f"{self.name}: {len(args)} positional arguments for {len(names)} parameters")
        values: dict[str, Value] = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise InferenceError(f"{self.name}: no parameter named {k!r} (it has {', '.join(names)})")
            if k in values:
                raise InferenceError(f"{self.name}: parameter {k!r} given twice")
            values[k] = v
        for p, default in self.params:
            if p not in values:
                if default is _REQUIRED:
                    raise InferenceError(f"{self.name}: parameter {p!r} is missing")
                values[p] = default
        return Args(self.name, values, generic)


def _default(e: Expr) -> Value:
    if isinstance(e, Literal):
        return e.value
    if isinstance(e, Array):
        return [_default(x) for x in e.items]
    if isinstance(e, Tuple):
        return tuple(_default(x) for x in e.items)
    raise ValueError(f"a parameter default must be a literal, got {e!r}")


def parse_signature(text: str) -> tuple[tuple[str, Any], ...]:
    """``"input, filter, bias = 0.0, padding = []"`` → parameters with defaults."""
    from t2n.backends.nnef.reader.parser import parse_expression
    from t2n.backends.nnef.reader.tree import Call, Ident

    if not text.strip():
        return ()
    call = parse_expression(f"f({text})")
    if not isinstance(call, Call) or not all(isinstance(a, Ident) for a in call.args):
        raise ValueError(f"bad signature {text!r}")
    out: list[tuple[str, Any]] = [(a.name, _REQUIRED) for a in call.args if isinstance(a, Ident)]
    out += [(k, _default(v)) for k, v in call.kwargs]
    return tuple(out)


class ReadOpTable(Table[OpDef]):
    """One family's NNEF operations (a name defined twice raises), filled by
    :meth:`op`: the standard ones in a ``COMMON`` table of each module of
    ``t2n.backends.nnef.reader``, tract's in a ``TRACT`` table of each module of
    ``t2n.backends.tract.reader``."""

    entry: ClassVar[str] = "NNEF operation"

    def op(self, names: str | Sequence[str], signature: str, *, stateful: bool = False) -> Callable[[Infer], Infer]:
        params = parse_signature(signature)

        def deco(fn: Infer) -> Infer:
            for n in [names] if isinstance(names, str) else names:
                self.register(n, OpDef(n, params, fn, stateful))
            return fn

        return deco


class ReadOps(Registry[OpDef]):
    """The NNEF operations one read knows, by name (immutable; see :mod:`t2n.registry`)."""

    entry: ClassVar[str] = "NNEF operation"

    @classmethod
    def of(cls, tables: Iterable[ReadOpTable]) -> ReadOps:
        return cls().merged(entries_of(tables))


def tensor(dtype: DType, shape: Sequence[object], known: np.ndarray | None = None) -> TensorVal:
    return TensorVal(TensorType(dtype, Shape(shape)), known)
