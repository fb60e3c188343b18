"""No function in t2n/ has a body longer than 40 code lines: blank lines, comments and
docstrings not counted, nor the signature and decorators (a public entry point documents
thirty keywords one per line, a command its click options; what it does is the body).

A long function is split into helpers whose names and docstrings say what each step is
for; there is no allowance list.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "t2n"
LIMIT = 40


def _docstring_lines(tree: ast.Module) -> set[int]:
    """The line numbers of every module, class and function docstring."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                lines.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    return lines


def _functions(node: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function under ``node`` with its qualified name (``Class.method``, ``outer.inner``)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + child.name, child
            yield from _functions(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, f"{prefix}{child.name}.")
        else:
            yield from _functions(child, prefix)


def code_lines_of(source: str) -> dict[str, int]:
    """Code lines of each function of a module's ``source``, by qualified name."""
    tree = ast.parse(source)
    text = source.splitlines()
    skipped = _docstring_lines(tree)
    counts: dict[str, int] = {}
    for name, fn in _functions(tree):
        counts[name] = sum(
            1 for i in range(fn.body[0].lineno, (fn.end_lineno or fn.lineno) + 1)
            if i not in skipped and text[i - 1].strip() and not text[i - 1].strip().startswith("#")
        )
    return counts


@functools.cache
def long_functions() -> dict[str, int]:
    """``path::qualified.name`` → code lines, for every function of t2n/ over the limit."""
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for name, n in code_lines_of(path.read_text(encoding="utf-8")).items():
            if n > LIMIT:
                found[f"{rel}::{name}"] = n
    return found


def test_no_function_is_over_the_limit() -> None:
    over = long_functions()
    assert not over, (
        f"functions over {LIMIT} code lines (split each into helpers with names and "
        "docstrings that say why): " + "; ".join(f"{k} ({n})" for k, n in sorted(over.items()))
    )


def test_the_count_skips_signature_docstrings_comments_and_blank_lines() -> None:
    source = '''
@decorator
def f(a,
      b):
    """A docstring
    on two lines."""

    # a comment
    x = 1
    return x
'''
    assert code_lines_of(source) == {"f": 2}
