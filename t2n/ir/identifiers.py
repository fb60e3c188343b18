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


def identifier_problem(name: object, *, tract: bool) -> str:
    """Why ``name`` cannot be an identifier in graph.nnef (``tract``: for tract), or ``""``."""
    if not isinstance(name, str):
        return f"is not a string (type {type(name).__name__})"
    if not name:
        return "is empty"
    if not _IDENTIFIER.match(name):
        return ("is not an NNEF identifier (ASCII letters, digits and '_', not starting "
                "with a digit)")
    if name in NNEF_KEYWORDS:
        return "is an NNEF keyword"
    if tract and name.startswith(TRACT_LITERAL_PREFIXES):
        start = next(p for p in TRACT_LITERAL_PREFIXES if name.startswith(p))
        return f"starts with {start!r}, which tract reads as a literal"
    return ""


def make_identifier(text: str, *, tract: bool, fallback: str, taken: Callable[[str], bool]) -> str:
    """A valid identifier made from ``text``, deterministically: other characters
    become ``_``, a leading digit gets ``fallback_`` before it (an empty result is
    ``fallback``), a keyword gets ``_`` after it, a tract literal start gets ``_``
    before it, and a name already ``taken`` gets ``_1``, ``_2``…"""
    name = _NOT_IDENTIFIER_CHAR.sub("_", text)
    if not name:
        name = fallback
    elif name[0].isdigit():
        name = f"{fallback}_{name}"
    if name in NNEF_KEYWORDS:
        name += "_"
    if tract and name.startswith(TRACT_LITERAL_PREFIXES):
        name = "_" + name
    base, i = name, 1
    while taken(name):
        name = f"{base}_{i}"
        i += 1
    return name
