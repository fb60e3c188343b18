"""What the attributes of an op kind take. Each :class:`~t2n.ir.schema.OpSchema` declares
its attributes as ``name → Attr``: a kind of value (:data:`INT`, :data:`FLOAT`,
:data:`DTYPE`, ``tuple_of(INT)``, unions with ``|``...) and whether the attribute is
required or optional (with the default its readers assume). :func:`t2n.ir.verify` checks
every op's attributes against its schema (:func:`attr_problems`).

Kinds are permissive where the IR legitimately varies: a sequence is a tuple or a list
(the parser gives tuples, lowerings often lists), a float may be given as an int (a rule
passing ``value=0``, which prints and parses back as an int), numpy scalars count as
Python ones. A bool is never an int nor a float.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs
import numpy as np

from t2n.ir.dims import Sym
from t2n.ir.dtypes import DType
from t2n.ir.tensor_data import TensorData


@attrs.frozen(eq=False)
class AttrKind:
    """A kind of attribute value: its name (in messages) and the test a value passes."""

    name: str
    test: Callable[[object], bool] = attrs.field(repr=False)

    def accepts(self, value: object) -> bool:
        return self.test(value)

    def __or__(self, other: AttrKind) -> AttrKind:
        return AttrKind(f"{self.name} | {other.name}", lambda v: self.test(v) or other.test(v))

    def __repr__(self) -> str:
        return self.name


def _is_bool(v: object) -> bool:
    return isinstance(v, (bool, np.bool_))


def _is_int(v: object) -> bool:
    return isinstance(v, (int, np.integer)) and not _is_bool(v)


BOOL = AttrKind("bool", _is_bool)
INT = AttrKind("int", _is_int)
FLOAT = AttrKind("float", lambda v: _is_int(v) or isinstance(v, (float, np.floating)))
STR = AttrKind("str", lambda v: isinstance(v, str))
DTYPE = AttrKind("DType", lambda v: isinstance(v, DType))
DATA = AttrKind("data", lambda v: isinstance(v, TensorData))
"""A tensor's data (:class:`~t2n.ir.tensor_data.TensorData`)."""
NONE = AttrKind("none", lambda v: v is None)
SIZE = INT | AttrKind("Sym", lambda v: isinstance(v, Sym))
"""A size: an int or a symbolic one."""


def tuple_of(kind: AttrKind, length: int | None = None) -> AttrKind:
    """A tuple (or list) of values of ``kind``, of ``length`` items when given."""
    name = f"tuple[{kind.name}]" if length is None else f"tuple[{', '.join([kind.name] * length)}]"
    return AttrKind(name, lambda v: isinstance(v, (tuple, list)) and (length is None or len(v) == length)
                    and all(kind.accepts(x) for x in v))


INTS = tuple_of(INT)
FLOATS = tuple_of(FLOAT)
STRS = tuple_of(STR)
PAIRS = tuple_of(tuple_of(INT, 2))
"""One ``(before, after)`` pair of ints per axis (paddings)."""


@attrs.frozen
class Attr:
    """One declared attribute: its kind, and whether an op must give it (``required``)
    or may leave it out, readers then assuming ``default``."""

    kind: AttrKind
    required: bool = True
    default: object = None


def required(kind: AttrKind) -> Attr:
    return Attr(kind)


def optional(kind: AttrKind, default: object = None) -> Attr:
    return Attr(kind, required=False, default=default)


NO_ATTRS: Mapping[str, Attr] = {}
"""The declaration of an op that takes no attribute."""


def attr_problems(declared: Mapping[str, Attr], given: Mapping[str, object]) -> list[str]:
    """What is wrong with the attributes ``given`` to an op declaring ``declared``: each
    unknown name, each missing required one, each value of another kind."""
    problems = [f"unknown attribute {name!r} (it takes {', '.join(sorted(declared)) or 'none'})"
                for name in given if name not in declared]
    for name, attr in declared.items():
        if name not in given:
            if attr.required:
                problems.append(f"missing required attribute {name!r} ({attr.kind.name})")
        elif not attr.kind.accepts(given[name]):
            problems.append(f"attribute {name!r} is {_shown(given[name])}, not {attr.kind.name}")
    return problems


def _shown(value: object) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"
