"""Op schemas: what an op kind is (traits), how its output types are inferred, and
how numpy evaluates it. One table serves type inference, constant folding and the
reference evaluator in tests.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from t2n.errors import InvalidArgumentError, IRLookupError
from t2n.ir.attributes import Attr
from t2n.ir.types import TensorType
from t2n.registry import DuplicateNameError, Registry, Table, collect, entries_of


class Trait(enum.Enum):
    """Properties generic passes ask about instead of checking op names."""

    PURE = "pure"  # no side effect: removable when unused, foldable when inputs are known
    CONSTANT_LIKE = "constant_like"  # produces data held by the op itself (const, variable)
    ELEMENTWISE = "elementwise"
    COMMUTATIVE = "commutative"
    STATEFUL = "stateful"  # keeps state between runs (e.g. a KV cache): never folded or removed


@attrs.frozen
class InferContext:
    """What an inference function sees: input types, attributes and known input values."""

    types: tuple[TensorType, ...]
    attrs: Mapping[str, Any]
    known: tuple[np.ndarray | None, ...]

    def known_or_none(self, i: int) -> np.ndarray | None:
        return self.known[i] if i < len(self.known) else None


InferFn = Callable[[InferContext], Sequence[TensorType]]
EvalFn = Callable[[Sequence[np.ndarray], Mapping[str, Any]], Sequence[np.ndarray]]
KnownFn = Callable[[InferContext], Sequence[np.ndarray | None]]


@attrs.frozen(eq=False)
class OpSchema:
    """Definition of one IR op kind."""

    name: str
    infer: InferFn
    evaluate: EvalFn | None = None
    traits: frozenset[Trait] = frozenset({Trait.PURE})
    doc: str = ""
    known: KnownFn | None = None
    """Output values that follow from input *types* alone (e.g. ``shape_of``)."""
    attrs: Mapping[str, Attr] | None = None
    """The attributes the op takes, by name (:mod:`t2n.ir.attributes`), which
    :func:`t2n.ir.verify` holds every op to; ``{}``: none. ``None`` (an op of a user's
    own that declares nothing): its attributes are not checked. Every built-in op
    declares them."""

    def has(self, trait: Trait) -> bool:
        return trait in self.traits

    def __repr__(self) -> str:
        return f"OpSchema({self.name})"


class DuplicateKeyError(IRLookupError, DuplicateNameError):
    """A table already holds an entry under this name."""


class UnknownOpError(IRLookupError):
    """An op kind that the op set does not define."""


class OpTable(Table[OpSchema]):
    """A family's op schemas, filled by decorators in that family's module.

    Nothing global is mutated: :meth:`OpSet.default` collects the tables of the
    modules in ``t2n.ir.ops`` explicitly.
    """

    entry: ClassVar[str] = "op"

    @property
    def schemas(self) -> dict[str, OpSchema]:
        return self.entries

    def add(self, schema: OpSchema) -> OpSchema:
        return self.register(schema.name, schema)

    def duplicate(self, name: str, first: OpSchema, second: OpSchema) -> Exception:
        return DuplicateKeyError(f"op {name!r} defined twice in family {self.family}")

    def op(
        self,
        name: str,
        *,
        evaluate: EvalFn | None = None,
        traits: Iterable[Trait] = (Trait.PURE,),
        doc: str = "",
        known: KnownFn | None = None,
        attrs: Mapping[str, Attr] | None = None,
    ) -> Callable[[InferFn], InferFn]:
        """Decorator registering ``fn`` as the type inference of op ``name``, which takes
        the attributes ``attrs`` (see :attr:`OpSchema.attrs`)."""

        def deco(fn: InferFn) -> InferFn:
            doc_ = doc or (fn.__doc__ or "")
            self.add(OpSchema(name, fn, evaluate, frozenset(traits), doc_, known, attrs))
            return fn

        return deco


class OpSet(Registry[OpSchema]):
    """The op kinds a graph may use, by name. Immutable: :meth:`extended` returns a new
    op set, so a user's ops live in the op set passed to one ``compile`` call and
    never in the built-in one."""

    entry: ClassVar[str] = "op"

    def get(self, name: str) -> OpSchema:
        found = super().get(name)
        if found is None:
            raise UnknownOpError(
                f"unknown IR op {name!r}: register its OpSchema in the graph's OpSet "
                "(OpSet.default().extended([...])), passed to compile(op_set=...)"
            )
        return found

    def extended(self, schemas: OpTable | Iterable[OpSchema], *, override: bool = False) -> OpSet:
        """A new op set with ``schemas`` (an :class:`OpTable` or :class:`OpSchema` objects)
        added; a name already defined raises unless ``override=True``."""
        items = schemas.schemas.values() if isinstance(schemas, OpTable) else schemas
        return self.merged(((_checked(s).name, s) for s in items), override=override)

    def duplicate(self, name: str, first: OpSchema, second: OpSchema) -> Exception:
        return DuplicateKeyError(
            f"op {name!r} is already in this op set; give it another name, "
            "or pass override=True to replace it"
        )

    _default: OpSet | None = None

    @classmethod
    def default(cls) -> OpSet:
        """All built-in ops: the ``TABLE`` of every module in ``t2n.ir.ops``."""
        if cls._default is None:
            cls._default = OpSet().merged(entries_of(collect("t2n.ir.ops", "TABLE", OpTable)))
        return cls._default


def _checked(schema: object) -> OpSchema:
    if not isinstance(schema, OpSchema):
        raise InvalidArgumentError(f"an op set holds OpSchema objects, got {type(schema).__name__} {schema!r}")
    return schema
