"""The layer order of ``t2n`` (docs/architecture.md, "Layers"), held against every import.

A module may import its own unit and the units of lower layers, never a unit of its
own layer or of a higher one; every import counts, whether at module level, inside a
function or only for type checking. No files of ``t2n`` import each other in a circle.
A lower layer that needs to name an upper layer's object declares a small Protocol of
its own.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "t2n"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("t2n.errors", "t2n.version"),
    ("t2n.registry",),
    ("t2n.ir",),
    ("t2n.torch_data",),
    ("t2n.quant",),
    ("t2n.serialize", "t2n.passes"),
    ("t2n.check",),
    ("t2n.backends.nnef",),
    ("t2n.backends",),
    ("t2n.backends.tract", "t2n.backends.khronos"),
    ("t2n.remodel",),
    ("t2n.artifact", "t2n.frontend"),
    ("t2n.options", "t2n.reading"),
    ("t2n.driver",),
    ("t2n.api",),
    ("t2n.reference",),
    ("t2n.llm.common",),
    ("t2n.llm.decoder",),
    ("t2n.llm.text", "t2n.llm.multimodal", "t2n.llm.seq2seq"),
    ("t2n.dropin", "t2n.llm", "t2n.nemo", "t2n.testing"),
    ("t2n.cli",),
    ("t2n",),
)
"""Units from the bottom layer up; the units of one layer do not import each other.
A module belongs to the longest unit that prefixes its name (``t2n`` alone is the
package's front: ``t2n/__init__.py``)."""

RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}


def module_files() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = module_files()


def unit_of(module: str) -> str | None:
    name = module
    while name:
        if name in RANK:
            return name
        name = name.rpartition(".")[0]
    return None


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """(imported t2n module, line) for every import statement in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*parent, base] if base else parent)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for name in names:
            if name == "t2n" or name.startswith("t2n."):
                target = _resolve(name)
                if target is not None and target != module:
                    yield target, node.lineno


@functools.cache
def edges() -> dict[str, list[tuple[str, int]]]:
    """Every module's t2n imports, read when a test asks (not while pytest collects)."""
    return {m: sorted(set(imports_of(m, p))) for m, p in MODULES.items()}


def test_every_module_has_a_layer():
    assert [m for m in MODULES if unit_of(m) is None] == []


def test_imports_follow_the_layers():
    wrong = []
    for module, targets in edges().items():
        unit = unit_of(module)
        assert unit is not None
        for target, line in targets:
            other = unit_of(target)
            assert other is not None
            if other != unit and RANK[other] >= RANK[unit]:
                how = "its own layer" if RANK[other] == RANK[unit] else "a higher layer"
                wrong.append(f"{MODULES[module].relative_to(ROOT)}:{line} imports {target} ({how}: {other})")
    assert wrong == [], "imports against the layer order:\n" + "\n".join(wrong)


def circles(graph: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            nxt = next(todo, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_no_files_import_each_other_in_a_circle():
    found = circles({m: [t for t, _ in targets] for m, targets in edges().items()})
    assert found == [], "import circles:\n" + "\n".join(", ".join(c) for c in found)


@pytest.mark.parametrize("source, target, allowed", [
    ("t2n.frontend.lower", "t2n.ir.graph", True),
    ("t2n.ir.graph", "t2n.frontend.lower", False),
    ("t2n.serialize.dat", "t2n.passes.base", False),
    ("t2n.cli.main", "t2n", False),
])
def test_the_rule_itself(source, target, allowed):
    a, b = unit_of(source), unit_of(target)
    assert a is not None and b is not None
    assert (a == b or RANK[b] < RANK[a]) is allowed


def test_no_module_imports_another_modules_private_name():
    """A name with a leading underscore is its module's own: a module that needs it from
    elsewhere gets a public name, or the piece moves to a layer both can import."""
    found = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("t2n"):
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if private and node.module != module:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {', '.join(private)} "
                                 f"from {node.module}")
    assert found == []
