"""One registry type for what t2n looks up by name: IR op schemas
(:class:`~t2n.ir.schema.OpTable` / :class:`~t2n.ir.schema.OpSet`), lowering rules
(:class:`~t2n.frontend.registry.RuleSet` / :class:`~t2n.frontend.registry.LoweringRegistry`)
and emitters (:class:`~t2n.backends.nnef.context.EmitterTable` /
:class:`~t2n.backends.nnef.context.EmitterSet`).

A :class:`Table` holds one family's entries, filled by a decorator in that family's
module; a name defined twice in it raises. A :class:`Registry` holds the entries one
compile uses, by name, and never changes: :meth:`Registry.merged` makes a new one (a name
it already has raises, unless ``override``), so a user's additions live in the registry
passed to one ``compile`` and never in the built-in one. :func:`collect` finds the table
of every module of a package: the one discovery, done when asked (nothing is filled as a
side effect of an import). Each kind subclasses both with its decorator, its entry type
and its errors.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar, Generic, Self, TypeVar

from t2n.errors import T2NError

V = TypeVar("V")
T = TypeVar("T", bound="Table[Any]")


class DuplicateNameError(T2NError, KeyError):
    """A table or registry already holds an entry under this name."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Table(Generic[V]):
    """One family's entries by name (a name defined twice raises :meth:`duplicate`'s error)."""

    entry: ClassVar[str] = "entry"
    """What an entry is called in messages."""

    def __init__(self, family: str) -> None:
        self.family = family
        self.entries: dict[str, V] = {}

    def register(self, name: str, value: V) -> V:
        if name in self.entries:
            raise self.duplicate(name, self.entries[name], value)
        self.entries[name] = value
        return value

    def duplicate(self, name: str, first: V, second: V) -> Exception:
        """The error for ``name`` defined twice in this table."""
        return DuplicateNameError(f"{self.entry} {name!r} defined twice in family {self.family}")

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)


class Registry(Generic[V]):
    """Name → entry for one compile. Immutable: :meth:`merged` returns a new registry."""

    entry: ClassVar[str] = "entry"

    def __init__(self, entries: Mapping[str, V] | None = None) -> None:
        self._entries: dict[str, V] = dict(entries or {})

    def get(self, name: str) -> V | None:
        return self._entries.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> list[str]:
        return sorted(self._entries)

    def items(self) -> list[tuple[str, V]]:
        return sorted(self._entries.items())

    def merged(self, entries: Iterable[tuple[str, V]], *, override: bool = False) -> Self:
        """A new registry with ``entries`` added; a name already there (in this registry
        or earlier in ``entries``) raises :meth:`duplicate`'s error unless ``override``."""
        out = dict(self._entries)
        for name, value in entries:
            if name in out and not override:
                raise self.duplicate(name, out[name], value)
            out[name] = value
        return type(self)(out)

    def duplicate(self, name: str, first: V, second: V) -> Exception:
        """The error for adding ``name`` again."""
        return DuplicateNameError(
            f"{self.entry} {name!r} is already in this registry; pass override=True to replace it")


def collect(package: str, attribute: str, kind: type[T]) -> list[T]:
    """The ``attribute`` of every module of ``package`` that is a ``kind`` table, by
    module name."""
    pkg = importlib.import_module(package)
    found = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        table = getattr(importlib.import_module(f"{package}.{info.name}"), attribute, None)
        if isinstance(table, kind):
            found.append(table)
    return found


def entries_of(tables: Iterable[Table[V]]) -> Iterator[tuple[str, V]]:
    """Every (name, entry) of ``tables``, table after table."""
    for table in tables:
        yield from table.entries.items()
