"""Checking user-given ``extension`` lines (``custom_extensions``) before they reach graph.nnef.

tract reads ``extension NAME REST;``: the first identifier names the extension and the
rest, up to ``;``, is its text. A ``;``, a newline or a ``#`` inside the text would end
the line early (or comment out its end) and let the rest run into the graph, so they
are refused. The extensions tract gives a meaning to are checked as tract parses them
(a malformed ``tract_assert`` makes tract abort while loading):

* ``tract_symbol S``: one symbol name;
* ``tract_assert [scenario:] A op B`` with ``op`` one of ``>= <= == < >`` and ``A``,
  ``B`` expressions of integers, symbols, ``+ - * /`` and parentheses;
* ``tract_registry`` lines are refused: t2n adds a registry when an op needs it, and
  ``check`` turns on in the engine only the registries it added.

Any other extension name is passed through (tract ignores extensions it does not know).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from t2n.errors import InvalidArgumentError
from t2n.ir.dims import parse_dim
from t2n.ir.identifiers import identifier_problem

_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\s+(.*))?\Z")
_TOKEN = re.compile(r"\s*(\d+|[A-Za-z_][A-Za-z0-9_]*|[()+\-*/])")
_COMPARISON = re.compile(r"(>=|<=|==|<|>)")
_SCENARIO = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*:(?!=)")
_FORM = ("each must be one extension line without the leading 'extension', such as "
         "'tract_assert S + P <= 4096' or 'tract_symbol B'")


def check_custom_extensions(lines: object, *, allowed: bool, where: str = "custom_extensions") -> tuple[str, ...]:
    """``lines`` as extension texts ready for graph.nnef, or an :class:`InvalidArgumentError`
    naming the bad line and the rule it breaks (``allowed``: the target takes tract
    extension lines)."""
    if isinstance(lines, (str, bytes)) or not isinstance(lines, Sequence):
        raise InvalidArgumentError(f"{where} must be a list of strings ({_FORM}), got {lines!r}")
    if lines and not allowed:
        raise InvalidArgumentError(
            f"{where}: Khronos NNEF has no custom extensions (they are tract extension "
            "lines); export to TractNNEF, or drop them"
        )
    return tuple(_check_line(line, f"{where}[{i}]") for i, line in enumerate(lines))


def _check_line(line: object, where: str) -> str:
    if not isinstance(line, str):
        raise InvalidArgumentError(f"{where} is a {type(line).__name__}, not a string; {_FORM}")
    text = line.strip()
    if text.startswith("extension ") or text == "extension":
        text = text[len("extension"):].strip()
    text = text[:-1].rstrip() if text.endswith(";") else text  # the renderer adds it
    for bad, what in ((";", "a ';' inside the line"), ("\n", "a line break"), ("\r", "a line break"),
                      ("#", "a '#' (it would comment out the end of the line)")):
        if bad in text:
            raise InvalidArgumentError(f"{where} = {line!r} contains {what}; {_FORM}")
    m = _LINE.match(text)
    if not m:
        raise InvalidArgumentError(f"{where} = {line!r} does not start with an extension name; {_FORM}")
    name, rest = m.group(1), (m.group(2) or "").strip()
    problem = ""
    if name == "tract_registry":
        problem = ("registries are added by t2n when an op needs them (and check() only "
                   "loads those); remove this line")
    elif name == "tract_symbol":
        problem = identifier_problem(rest, tract=True) if rest else "names no symbol"
        problem = f"symbol {rest!r} {problem}" if problem and rest else problem
    elif name == "tract_assert":
        problem = _assert_problem(rest)
    if problem:
        raise InvalidArgumentError(f"{where} = {line!r}: {problem}")
    return f"{name} {rest}" if rest else name


def _assert_problem(text: str) -> str:
    scenario = _SCENARIO.match(text)
    if scenario:
        text = text[scenario.end():]
    sides = _COMPARISON.split(text)
    if len(sides) != 3:
        return ("tract_assert takes one comparison (>=, <=, ==, < or >) between two "
                "expressions, such as 'S + P <= 4096'")
    for side in (sides[0], sides[2]):
        problem = _expression_problem(side)
        if problem:
            return f"tract_assert: {problem}"
    return ""


def _expression_problem(text: str) -> str:
    pos, stripped = 0, text.rstrip()
    while pos < len(stripped):
        m = _TOKEN.match(stripped, pos)
        if not m:
            return f"cannot read {stripped[pos:].strip()!r} in {text.strip()!r} (integers, symbols, + - * / and parentheses only)"
        pos = m.end()
    if not stripped.strip():
        return "a side of the comparison is empty"
    try:
        parse_dim(stripped)
    except (ValueError, IndexError, ZeroDivisionError):
        return f"{text.strip()!r} is not a complete expression"
    return ""
