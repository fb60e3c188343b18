"""Reading what an artifact's ``graph.nnef`` declares, without an engine: version,
extension lines (registries, symbols, assertions), tract properties, fragments, the
graph's inputs (type and shape), outputs, variables and the ops it calls.

A reader of the declarations t2n and other NNEF writers put at known places, not a
full NNEF parser: statements are split on ``;`` outside strings, comments dropped.
"""

from __future__ import annotations

import re
from collections import Counter

import attrs

from t2n.errors import CorruptArchiveError

_STRING = r'"(?:[^"\\]|\\.)*"'
_TOKENS = re.compile(rf'{_STRING}|#[^\n]*|;|\{{|\}}|[^"#;{{}}]+')
_GRAPH = re.compile(r"graph\s+(\w+)\s*\(([^)]*)\)\s*->\s*\(([^)]*)\)\s*\Z", re.S)
_ASSIGN = re.compile(r"(.+?)=\s*([A-Za-z_]\w*)\s*(<\s*(\w+)\s*>)?\s*\((.*)\)\s*\Z", re.S)
_SHAPE = re.compile(r"shape\s*=\s*\[([^\]]*)\]")
_LABEL = re.compile(rf"label\s*=\s*({_STRING})")
_DATUM = re.compile(rf"datum_type\s*=\s*({_STRING})")
_PROPERTY = re.compile(rf"\(\s*({_STRING})\s*,\s*({_STRING}|[^()]*?)\s*\)")

_NNEF_TYPES = {"scalar": "f32", "integer": "i64", "logical": "bool"}
"""What a standard ``external<T>``/``variable<T>`` holds (tract reads them so)."""


@attrs.frozen
class Declared:
    """An input or variable: its identifier, element type and shape (ints, or symbol
    expressions as text); ``label`` is a variable's tensor file (without ``.dat``)."""

    name: str
    dtype: str
    shape: tuple[int | str, ...]
    label: str = ""


@attrs.frozen
class GraphText:
    version: str
    graph_name: str
    inputs: tuple[Declared, ...]
    outputs: tuple[str, ...]
    variables: tuple[Declared, ...]
    ops: dict[str, int]
    registries: tuple[str, ...]
    symbols: tuple[str, ...]
    assertions: tuple[str, ...]
    extensions: tuple[str, ...]
    """Extension lines other than registries, symbols and assertions."""
    properties: dict[str, str]
    fragments: tuple[str, ...]


def _statements(text: str, source: str) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """Top-level statements, and each ``{ ... }`` block with the header before it."""
    top: list[str] = []
    blocks: list[tuple[str, list[str]]] = []
    current: list[str] = []
    inner: list[str] | None = None
    for tok in _TOKENS.findall(text):
        if tok.startswith("#"):
            continue
        if tok == "{":
            if inner is not None:
                raise CorruptArchiveError(f"{source}: nested '{{' in graph.nnef")
            header, current, inner = "".join(current).strip(), [], []
            blocks.append((header, inner))
        elif tok == "}":
            if inner is None:
                raise CorruptArchiveError(f"{source}: '}}' without '{{' in graph.nnef")
            if "".join(current).strip():
                inner.append("".join(current).strip())
            current, inner = [], None
        elif tok == ";":
            (top if inner is None else inner).append("".join(current).strip())
            current = []
        else:
            current.append(tok)
    if inner is not None:
        raise CorruptArchiveError(f"{source}: graph.nnef ends inside a '{{ ... }}' block (truncated?)")
    return top, blocks


def _shape(args: str) -> tuple[int | str, ...]:
    m = _SHAPE.search(args)
    if m is None or not m.group(1).strip():
        return ()
    dims = [d.strip() for d in m.group(1).split(",")]
    return tuple(int(d) if re.fullmatch(r"-?\d+", d) else d for d in dims)


def _unquote(text: str) -> str:
    return text[1:-1].replace('\\"', '"').replace("\\\\", "\\") if text.startswith('"') else text


def _declared(name: str, op: str, nnef_type: str | None, args: str) -> Declared:
    if op == "tract_core_external":
        m = _DATUM.search(args)
        dtype = _unquote(m.group(1)) if m else "?"
    else:
        dtype = _NNEF_TYPES.get(nnef_type or "scalar", nnef_type or "?")
    label = _LABEL.search(args)
    return Declared(name, dtype, _shape(args), _unquote(label.group(1)) if label else "")


_VERSION = re.compile(r"version\s+(\d+\.\d+)\Z")
NNEF_VERSIONS = ("1.0",)


def _version(top: list[str], source: str) -> str:
    """The version the first statement declares; anything else is refused (NNEF parsers,
    tract's included, refuse a document that does not begin with ``version X.Y;``)."""
    first = top[0] if top else ""
    m = _VERSION.match(first)
    if m is None:
        shown = f"begins with {first[:60]!r}" if first else "is empty"
        raise CorruptArchiveError(f"{source}: does not begin with 'version 1.0;' (it {shown}); the file is "
                                  "damaged or not an NNEF graph")
    if m.group(1) not in NNEF_VERSIONS:
        raise CorruptArchiveError(f"{source}: declares NNEF version {m.group(1)}, which does not exist "
                                  f"(NNEF is version {', '.join(NNEF_VERSIONS)}); the version line was changed")
    return m.group(1)


def _check_io(inputs: list[str], outputs: tuple[str, ...], externals: dict[str, Declared], body: list[str],
              source: str) -> None:
    """Every input declared by an ``external`` and every output assigned in the body."""
    assigned: set[str] = set()
    for stmt in body:
        lhs, eq, _ = stmt.partition("=")
        if eq:
            assigned.update(re.findall(r"[A-Za-z_]\w*", lhs))
    problems = [f"input {n!r} is never declared (no '{n} = external(...)')" for n in inputs if n not in externals]
    problems += [f"output {n!r} is never assigned" for n in outputs if n not in assigned]
    if problems:
        raise CorruptArchiveError(f"{source}: {'; '.join(problems)}; the graph is damaged or incomplete")


def read_graph_text(text: str, source: str = "graph.nnef") -> GraphText:
    """What ``graph.nnef`` declares; a text without a ``graph`` block is refused."""
    top, blocks = _statements(text, source)
    version = _version(top, source)
    kinds, other = _extensions(top)
    m, body = _graph_block(blocks, source)
    names = [n.strip() for n in m.group(2).split(",") if n.strip()]
    outputs = tuple(n.strip() for n in m.group(3).split(",") if n.strip())
    found, variables, ops = _declarations(body)
    fragments = tuple(h.split("(")[0].split()[1] for h, _ in blocks if h.startswith("fragment "))
    _check_io(names, outputs, found, body, source)
    inputs = tuple(found.get(n, Declared(n, "?", ())) for n in names)
    return GraphText(version, m.group(1), inputs, outputs, tuple(variables), dict(ops.most_common()),
                     tuple(kinds["tract_registry"]), tuple(kinds["tract_symbol"]),
                     tuple(kinds["tract_assert"]), tuple(other), _properties(blocks),
                     tuple(f for f in fragments if f != "tract_core_properties"))


def _extensions(top: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """The ``extension`` lines: tract's registries, symbols and assertions by kind, and
    the others as written."""
    ext = [s.split(None, 1)[1] for s in top if s.startswith("extension ") and len(s.split(None, 1)) > 1]
    kinds: dict[str, list[str]] = {"tract_registry": [], "tract_symbol": [], "tract_assert": []}
    other: list[str] = []
    for line in ext:
        word, _, rest = line.partition(" ")
        if word in kinds:
            kinds[word].append(rest.strip())
        else:
            other.append(line)
    return kinds, other


def _graph_block(blocks: list[tuple[str, list[str]]], source: str) -> tuple[re.Match[str], list[str]]:
    """The one ``graph`` block: its header matched (name, inputs, outputs) and its body."""
    graphs = [(h, body) for h, body in blocks if h.startswith("graph ")]
    if len(graphs) != 1:
        raise CorruptArchiveError(
            f"{source}: {len(graphs)} 'graph' blocks found (one expected); is this an NNEF graph.nnef?")
    header, body = graphs[0]
    m = _GRAPH.match(header)
    if m is None:
        raise CorruptArchiveError(f"{source}: cannot read the graph header {header[:120]!r}")
    return m, body


def _declarations(body: list[str]) -> tuple[dict[str, Declared], list[Declared], Counter[str]]:
    """The graph's externals by name, its variables, and how often each op is called."""
    found: dict[str, Declared] = {}
    variables: list[Declared] = []
    ops: Counter[str] = Counter()
    for stmt in body:
        a = _ASSIGN.match(stmt)
        if a is None:
            continue
        lhs, op, _, nnef_type, args = a.groups()
        ops[op] += 1
        target = lhs.strip()
        if op in ("external", "tract_core_external"):
            found[target] = _declared(target, op, nnef_type, args)
        elif op == "variable":
            variables.append(_declared(target, op, nnef_type, args))
    return found, variables, ops


def _properties(blocks: list[tuple[str, list[str]]]) -> dict[str, str]:
    """The key/value pairs of the ``tract_core_properties`` fragment."""
    props: dict[str, str] = {}
    for h, frag_body in blocks:
        if h.startswith("fragment tract_core_properties"):
            for stmt in frag_body:
                props.update((_unquote(k), _unquote(v.strip())) for k, v in _PROPERTY.findall(stmt))
    return props
