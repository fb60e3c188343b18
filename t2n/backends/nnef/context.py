"""Emission state for one render: identifiers, lines, tensors, extensions, problems."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol

import attrs
import numpy as np

from t2n.backends.nnef.naming import Namer
from t2n.errors import OpProblem
from t2n.ir import ArrayData, DType, Graph, Op, Sym, TensorData, Trait, Value
from t2n.ir.identifiers import IdentifierRules, free_name
from t2n.registry import DuplicateNameError, Registry, Table, collect, entries_of


class RenderTarget(Protocol):
    """What rendering reads of a target (:class:`t2n.backends.target.Target`): emitters
    ask ``ctx.target.at_least("0.23.0")`` or ``ctx.target.bf16_as``."""

    @property
    def version(self) -> str: ...

    @property
    def bf16_as(self) -> DType: ...

    @property
    def identifier_rules(self) -> IdentifierRules: ...

    def at_least(self, version: str) -> bool: ...

    def fragment_text(self, name: str) -> str: ...


@attrs.frozen
class TensorFile:
    """One ``.dat`` member: its id (path without ``.dat``), the data and the dtype written."""

    label: str
    data: TensorData
    dtype: DType

    @property
    def path(self) -> str:
        return f"{self.label}.dat"


def label_to_path(label: str) -> str:
    """A safe member path for a parameter name: ``/`` and a leading ``.`` become ``_``.

    Dots stay, so ``encoder.layer.0.weight`` is ``encoder.layer.0.weight.dat``.
    """
    out = label.replace("\\", "_")
    parts = [("_" + p[1:] if p.startswith(".") else p) or "_" for p in out.split("/")]
    return "/".join(parts)


def nnef_float(x: float) -> str:
    if math.isnan(x):
        raise ValueError("NaN has no NNEF literal")
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    # No "+" in the exponent: tract before 0.23 cannot parse 1e+38 (1e38 is the same number).
    text = repr(float(x)).replace("e+", "e")
    return text if any(c in text for c in ".e") else text + ".0"


def literal(value: Any) -> str:
    """NNEF text for a Python attribute value (tuples print as NNEF tuples)."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, Sym):
        return str(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return nnef_float(float(value))
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, DType):
        return f'"{value.value}"'
    if isinstance(value, tuple):
        return "(" + ", ".join(literal(v) for v in value) + ")"
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    raise TypeError(f"no NNEF literal for {value!r}")


class Raw(str):
    """Text inserted as is (an expression or identifier), not quoted as a string."""


def nnef_type(dtype: DType) -> str:
    if dtype is DType.BOOL:
        return "logical"
    return "scalar" if dtype.is_float else "integer"


class EmitContext:
    """What an emitter works with. Emitters call :meth:`arg` for operands and
    :meth:`assign` / :meth:`call` to write lines."""

    def __init__(self, target: RenderTarget, graph: Graph) -> None:
        self.target = target
        self.graph = graph
        self.lines: list[str] = []
        self.extensions: dict[str, None] = {}
        self.registries: dict[str, None] = {}
        self.fragments: dict[str, str] = {}
        self.tensors: list[TensorFile] = []
        self.problems: list[OpProblem] = []
        self.quant_entries: dict[str, str] = {}
        """graph.quant lines emitters add (identifier → quantization invocation)."""
        self._ids: dict[Value, str] = {}
        self._used: set[str] = set()
        self._labels: set[str] = set()
        self._materialized: dict[Value, str] = {}
        self._ranked: dict[tuple[Value, int], str] = {}
        self.op: Op | None = None
        self.namer = Namer(graph.info.naming_scheme, graph.info.traced_names)

    # -- identifiers ---------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        """A new identifier for ``hint``, as the graph's naming scheme forms it."""
        name = free_name(self.target.identifier_rules.usable(self.namer.form(hint)), self._used.__contains__)
        self._used.add(name)
        return name

    def reserve_names(self, names: Sequence[str]) -> None:
        """Keep ``names`` (symbols) from being used as tensor identifiers."""
        self._used.update(names)

    def id(self, v: Value) -> str:
        """The identifier that names ``v`` in graph.nnef."""
        if v not in self._ids:
            self._ids[v] = self.fresh(self.namer.value_hint(v))
        return self._ids[v]

    def reserve(self, v: Value, name: str) -> str:
        """Give ``v`` exactly ``name`` (graph inputs and outputs keep the user's names,
        which the frontend has checked; anything else gets a fresh name)."""
        if (name in self._used and self._ids.get(v) != name) or \
                self.target.identifier_rules.problem(name):
            name = self.fresh(name)
        self._used.add(name)
        self._ids[v] = name
        return name

    # -- operands ------------------------------------------------------------------
    def is_const(self, v: Value) -> bool:
        return v.producer is not None and v.producer.kind == "const"

    def const_data(self, v: Value) -> np.ndarray | None:
        if self.is_const(v):
            assert v.producer is not None
            return np.asarray(v.producer.attrs["data"].values())
        return None

    def arg(self, v: Value) -> str:
        """``v`` as an operand: a literal for scalar constants, else an identifier
        (constants are materialized on first use)."""
        data = self.const_data(v)
        if data is not None and data.ndim == 0 and data.dtype != object:
            return self.scalar_operand(v, data)
        if data is not None:
            return self.materialize(v, data)
        return self.id(v)

    def scalar_operand(self, v: Value, data: np.ndarray) -> str:
        """A scalar constant as an operand, in standard NNEF: a literal, except for
        infinities and NaN, which have none (a .dat holds them). A target whose engine
        reads literals differently gives its renderer a context that overrides this."""
        if v.type.dtype.is_float and not math.isfinite(float(data.item())):
            return self.materialize(v, data)
        return literal(data.item())

    def typed_float(self, value: float, dtype: DType) -> Raw | float:
        """A float literal standing for a ``dtype`` value where the op does not convert
        its operands (a ``select`` branch). Standard NNEF literals have no precision."""
        return value

    def arg_at_rank(self, v: Value, rank: int) -> str:
        """``v`` as an operand of a broadcasting op of output rank ``rank``.

        NNEF (and tract) align lower-rank operands from the left, numpy from the
        right: give lower-rank tensors leading unit axes. Scalars need none.
        """
        text = self.arg(v)
        if v.rank == 0 or v.rank >= rank:
            return text
        key = (v, rank)
        if key not in self._ranked:
            shape = list(v.type.shape)
            stored = v.producer is not None and v.producer.kind in ("const", "variable")
            if stored and all(isinstance(d, int) for d in shape):
                # A constant or parameter gets its unit axes by a reshape: tract 0.23.9
                # runs a binary op whose stored operand went through an unsqueeze 3x
                # slower (a batch norm's per-channel mul + add of a [1, 16, 128, 128] map:
                # 0.31 against 0.10 ms, the same OptBinChain node; the artifact-speed grid,
                # `norm kind=batch`, benchmarks/RESULTS_ARTIFACT_SPEED.md)
                self._ranked[key] = self.emit(f"{v.name}_r{rank}", "reshape", Raw(text),
                                              shape=[1] * (rank - v.rank) + shape)
            else:
                self._ranked[key] = self.emit(f"{v.name}_r{rank}", "unsqueeze", Raw(text),
                                              axes=list(range(rank - v.rank)))
        return self._ranked[key]

    def materialize(self, v: Value, data: np.ndarray) -> str:
        if v in self._materialized:
            return self._materialized[v]
        name = self.id(v)
        if data.dtype == object:
            self.assign(name, self.symbolic_tensor(data, v.type.dtype))
        else:
            assert v.producer is not None
            td: TensorData = v.producer.attrs["data"]
            self.variable_line(name, td, f"constants/{name}", v.type.dtype)
        self._materialized[v] = name
        return name

    def symbolic_tensor(self, data: np.ndarray, dtype: DType) -> str:
        """A tensor holding symbolic dims (tract only; others reject symbols earlier)."""
        text = literal(data.item()) if data.ndim == 0 else literal(data.tolist())
        return self.call("tract_core_cast", Raw(text), to=dtype.value)

    def variable_line(self, name: str, data: TensorData, label: str, dtype: DType) -> None:
        label = self.add_tensor(label, data, dtype)
        self.assign(
            name,
            f"variable<{nnef_type(dtype)}>(shape = {literal(list(data.shape))}, label = {literal(label)})",
        )

    def add_tensor(self, label: str, data: TensorData, dtype: DType) -> str:
        label = free_name(label_to_path(label), self._labels.__contains__)
        self._labels.add(label)
        self.tensors.append(TensorFile(label, data, dtype))
        return label

    def known(self, v: Value, what: str) -> list[Any] | None:
        """The value of a small integer operand as a flat list of dims, or None (and a
        problem is recorded) when it is computed at run time."""
        if v.known is not None:
            return [d if isinstance(d, Sym) else int(d) for d in np.asarray(v.known).reshape(-1).tolist()]
        self.unsupported(f"{what} must be known at export time (it is computed at run time)")
        return None

    # -- writing -------------------------------------------------------------------
    def call(self, op: str, *args: Any, **attrs: Any) -> str:
        parts = [a if isinstance(a, str) else (self.arg(a) if isinstance(a, Value) else literal(a)) for a in args]
        for k, val in attrs.items():
            if val is None:
                continue
            parts.append(f"{k} = {val if isinstance(val, Raw) else literal(val)}")
        return f"{op}({', '.join(parts)})"

    def assign(self, lhs: str | Sequence[str], expr: str) -> None:
        left = lhs if isinstance(lhs, str) else "(" + ", ".join(lhs) + ")"
        self.lines.append(f"    {left} = {expr};")

    def emit(self, out: Value | str, op: str, *args: Any, **attrs: Any) -> str:
        """Assign ``op(args, attrs)`` to ``out`` (a Value or a fresh temporary hint)."""
        name = self.id(out) if isinstance(out, Value) else self.fresh(out)
        self.assign(name, self.call(op, *args, **attrs))
        return name

    def use_registry(self, name: str) -> None:
        self.extensions[f"tract_registry {name}"] = None
        self.registries[name] = None

    def use_fragment(self, name: str) -> str:
        if name not in self.fragments:
            self.fragments[name] = self.target.fragment_text(name)
        return name

    def unsupported(self, reason: str) -> None:
        op = self.op
        self.problems.append(
            OpProblem(
                op=(op.loc.aten or op.kind) if op is not None else "?",
                module=op.loc.module if op is not None else "",
                source=op.loc.source if op is not None else "",
                reason=reason,
            )
        )

    def is_constant_like(self, v: Value) -> bool:
        return v.producer is not None and v.producer.has(Trait.CONSTANT_LIKE)


Emitter = Callable[[EmitContext, Op], None]


class DuplicateEmitterError(DuplicateNameError):
    """Two emitters claim the same IR op in one table."""


class EmitterTable(Table[Emitter]):
    """A family's emitters by IR op kind (duplicate keys raise)."""

    entry: ClassVar[str] = "emitter"

    @property
    def emitters(self) -> dict[str, Emitter]:
        return self.entries

    def add(self, kind: str, fn: Emitter) -> None:
        self.register(kind, fn)

    def duplicate(self, name: str, first: Emitter, second: Emitter) -> Exception:
        return DuplicateEmitterError(f"emitter for {name!r} defined twice in {self.family}")

    def emitter(self, *kinds: str) -> Callable[[Emitter], Emitter]:
        def deco(fn: Emitter) -> Emitter:
            for k in kinds:
                self.add(k, fn)
            return fn

        return deco


class EmitterSet(Registry[Emitter]):
    """IR op kind → emitter: the tables a target renders with, merged."""

    entry: ClassVar[str] = "emitter"

    def duplicate(self, name: str, first: Emitter, second: Emitter) -> Exception:
        return DuplicateEmitterError(f"two emitters for {name!r} ({_qualname(first)} and {_qualname(second)})")

    @classmethod
    def collected(cls, package: str, attribute: str) -> dict[str, Emitter]:
        """The emitters of the ``attribute`` table (``"COMMON"``, ``"TRACT"``...) of every
        module of ``package`` (two for one IR op raise)."""
        return dict(cls().merged(entries_of(collect(package, attribute, EmitterTable))).items())


def _qualname(fn: Emitter) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"


__all__ = ["ArrayData", "EmitContext", "EmitterTable", "Raw", "TensorFile", "literal", "nnef_type"]
