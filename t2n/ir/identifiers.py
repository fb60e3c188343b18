"""Which names can stand for a tensor or a symbol in graph.nnef, on each target.

One place for the rule, used by the frontend (input/output names), the dynamic-axes
pass (symbol names) and the NNEF emitters (identifiers they make up):

* NNEF 1.0.5 identifiers are ASCII ``[A-Za-z_][A-Za-z0-9_]*`` and not a keyword; the
  Khronos parser refuses every keyword below as an identifier.
* tract reads keywords as identifiers, but reads an identifier that *starts* with
  ``true``, ``false`` or ``inf`` as that literal when it is used as an operand: ``inf``
  becomes infinity and ``false`` the boolean (silently), ``info`` or ``true_x`` make
  the load fail. Such names are therefore not usable on tract.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import attrs

NNEF_KEYWORDS = frozenset([
    "version", "extension", "fragment", "graph", "tensor", "integer", "scalar", "logical",
    "string", "true", "false", "for", "in", "if", "else", "yield", "length_of", "shape_of",
    "range_of",
])
"""The reserved words of the NNEF 1.0.5 grammar (never identifiers)."""

TRACT_LITERAL_PREFIXES = ("true", "false", "inf")
"""Identifier starts that tract's parser reads as a literal."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NOT_IDENTIFIER_CHAR = re.compile(r"[^A-Za-z0-9_]")


@attrs.frozen
class IdentifierRules:
    """Which names an engine reads as identifiers: NNEF's rule, plus the identifier
    starts (``literal_prefixes``) that this engine reads as literals. A target says
    which rules it follows (``Target.identifier_rules``)."""

    literal_prefixes: tuple[str, ...] = ()
    reader: str = "NNEF"
    """Who reads the names, as error messages say it."""

    def problem(self, name: object) -> str:
        """Why ``name`` cannot be an identifier in graph.nnef, or ``""``."""
        if not isinstance(name, str):
            return f"is not a string (type {type(name).__name__})"
        if not name:
            return "is empty"
        if not _IDENTIFIER.match(name):
            return ("is not an NNEF identifier (ASCII letters, digits and '_', not starting "
                    "with a digit)")
        if name in NNEF_KEYWORDS:
            return "is an NNEF keyword"
        start = self._literal_start(name)
        if start:
            return f"starts with {start!r}, which {self.reader} reads as a literal"
        return ""

    def _literal_start(self, name: str) -> str:
        return next((p for p in self.literal_prefixes if name.startswith(p)), "")

    def usable(self, name: str) -> str:
        """``name`` (letters, digits and ``_``, not starting with a digit) changed as
        little as needed to be read as an identifier: a keyword gets ``_`` after it, a
        literal start gets ``_`` before it."""
        if name in NNEF_KEYWORDS:
            name += "_"
        return "_" + name if self._literal_start(name) else name

    def make(self, text: str, *, fallback: str, taken: Callable[[str], bool]) -> str:
        """A valid identifier made from ``text``, deterministically: other characters
        become ``_``, a leading digit gets ``fallback_`` before it (an empty result is
        ``fallback``), then :meth:`usable`, and a name already ``taken`` gets ``_1``,
        ``_2``…"""
        name = _NOT_IDENTIFIER_CHAR.sub("_", text)
        if not name:
            name = fallback
        elif name[0].isdigit():
            name = f"{fallback}_{name}"
        return free_name(self.usable(name), taken)


def free_name(base: str, taken: Callable[[str], bool]) -> str:
    """``base``, or else the first of ``base_1``, ``base_2``… that is not ``taken``: the
    one way t2n makes a name unique (identifiers, tensor files, symbols)."""
    name, i = base, 1
    while taken(name):
        name, i = f"{base}_{i}", i + 1
    return name


STANDARD_IDENTIFIERS = IdentifierRules()
"""NNEF 1.0.5's rule, as the Khronos parser applies it."""

TRACT_IDENTIFIERS = IdentifierRules(TRACT_LITERAL_PREFIXES, "tract")
"""NNEF's rule, and no identifier starting as a literal tract reads."""


def identifier_problem(name: object, *, tract: bool) -> str:
    """Why ``name`` cannot be an identifier in graph.nnef (``tract``: for tract), or ``""``."""
    return (TRACT_IDENTIFIERS if tract else STANDARD_IDENTIFIERS).problem(name)
