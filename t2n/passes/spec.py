"""Pipelines given by name: ``"default,-fold-batch-norm,+my-pass@after:cleanup"``.

A spec is a string of comma-separated items or a list whose items are such strings
(one item each) or :class:`~t2n.passes.Pass` objects. Items, in order:

- ``default``: the default pipeline's stages;
- ``NAME`` or ``+NAME``: add the pass called ``NAME`` at the end;
- ``+NAME@before:OTHER`` / ``+NAME@after:OTHER``: add it just before / after the first
  stage called ``OTHER`` in the pipeline built so far;
- ``-NAME``: remove every stage called ``NAME`` (it must be there);
- a Pass object: add it at the end, as ``+`` would, called by its ``name``.

A stage is called by the name it was added under (a ``pass_registry`` key, a
built-in name, or a Pass object's ``name``); that is what ``-NAME`` and anchors match.

A spec whose first item adds or removes (``+``, ``-`` or a Pass object) edits the
default pipeline; one that starts with a bare name (or ``default``) is the whole
pipeline. An empty spec is the default pipeline. Names are letters, digits, ``-``,
``_`` and ``.``. An unknown name, the removal of a stage that is not in the pipeline,
an unknown anchor or a malformed item raises
:class:`~t2n.errors.InvalidArgumentError` naming the item and listing the known names.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence

import attrs

from t2n.errors import InvalidArgumentError
from t2n.passes.base import Pass

PipelineSpec = str | Sequence[str | Pass]
"""What ``compile(passes=...)`` and :func:`parse_spec` accept."""

DEFAULT_PIPELINE: tuple[str, ...] = ("bf16-as", "dynamic-axes", "cleanup", "fold-batch-norm", "cleanup")
"""The names ``default`` stands for in a pipeline spec."""

REQUIRED: tuple[str, ...] = ("bf16-as", "dynamic-axes")
"""Passes ``compile`` always runs (a spec cannot remove them)."""

_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
_ITEM = re.compile(rf"(?P<sign>[+-]?)(?P<name>{_NAME})(?:@(?P<where>before|after):(?P<anchor>{_NAME}))?")
NAME_RE = re.compile(_NAME)
"""What a pass name may look like in a spec (``re.fullmatch`` it)."""


_Stage = tuple[str, Pass]
"""A pass in the pipeline being built, with the name it was added under (its
``display_name`` for a Pass object): what removals and anchors match."""


@attrs.frozen
class _Item:
    text: str
    sign: str
    name: str
    where: str | None = None
    anchor: str | None = None


def parse_spec(
    spec: PipelineSpec | object,
    known: Mapping[str, Pass],
    *,
    default: Sequence[str] = DEFAULT_PIPELINE,
    required: Collection[str] = REQUIRED,
) -> list[Pass]:
    """The passes ``spec`` (a :data:`PipelineSpec`, checked here) names, in order (see
    the module docstring for the syntax).

    ``known`` maps each name a spec may use to its pass
    (:func:`t2n.passes.parse_pipeline` gives the built-in passes); ``default`` lists the
    names ``default`` stands for; names in ``required`` cannot be removed.
    """
    items = _items(spec)
    if not items or isinstance(items[0], Pass) or items[0].sign:
        items = [_Item("default", "", "default"), *items]
    pipeline: list[_Stage] = []
    for item in items:
        if isinstance(item, Pass):
            pipeline.append((item.display_name, item))
        elif item.name == "default" and not item.sign and item.where is None:
            pipeline += [(n, _lookup(n, known, f"default pipeline entry {n!r}")) for n in default]
        elif item.sign == "-":
            _remove(pipeline, item, known, required)
        else:
            _add(pipeline, item, (item.name, _lookup(item.name, known, repr(item.text))))
    return [p for _, p in pipeline]


def _items(spec: object) -> list[_Item | Pass]:
    if isinstance(spec, str):
        raw: list[object] = [] if not spec.strip() else list(spec.split(","))
    elif isinstance(spec, Pass):
        raise InvalidArgumentError(f"passes must be a list or a pipeline string; write passes=[{spec!r}]")
    elif isinstance(spec, Sequence) and not isinstance(spec, bytes):
        raw = list(spec)
    else:
        raise InvalidArgumentError(
            f"passes must be a pipeline string such as 'default,-fold-batch-norm' or a list of "
            f"names and t2n.Pass objects, got {spec!r}"
        )
    return [_item(x, i) for i, x in enumerate(raw)]


def _item(x: object, index: int) -> _Item | Pass:
    if isinstance(x, Pass):
        return x
    if isinstance(x, type) and issubclass(x, Pass):
        raise InvalidArgumentError(f"passes[{index}] = {x!r} is a Pass class, not an instance (add '()')")
    if not isinstance(x, str):
        raise InvalidArgumentError(f"passes[{index}] = {x!r} is a {type(x).__name__}, not a t2n.Pass or a name")
    text = x.strip()
    m = _ITEM.fullmatch(text)
    if m is None:
        raise InvalidArgumentError(
            f"pipeline item {x!r} is malformed; write NAME, +NAME, -NAME, +NAME@before:OTHER or "
            "+NAME@after:OTHER (names are letters, digits, '-', '_' and '.'), items separated by commas"
        )
    if m["sign"] == "-" and m["where"]:
        raise InvalidArgumentError(f"pipeline item {x!r}: a removal takes no position; write -{m['name']}")
    return _Item(text, m["sign"], m["name"], m["where"], m["anchor"])


def _known_list(known: Mapping[str, Pass]) -> str:
    return ", ".join(["default", *sorted(known)])


def _lookup(name: str, known: Mapping[str, Pass], what: str) -> Pass:
    if name not in known:
        raise InvalidArgumentError(
            f"pipeline item {what}: no pass is called {name!r}; the known names are: {_known_list(known)} "
            "(give your own passes as Pass objects in the list, or by name in pass_registry)"
        )
    return known[name]


def _stage_names(pipeline: Sequence[_Stage]) -> str:
    return ", ".join(name for name, _ in pipeline) or "(empty)"


def _remove(pipeline: list[_Stage], item: _Item, known: Mapping[str, Pass], required: Collection[str]) -> None:
    if item.name in required:
        raise InvalidArgumentError(
            f"pipeline item {item.text!r}: {item.name} cannot be removed (it does only what compile's "
            "own arguments ask of it, and nothing when they ask nothing)"
        )
    kept = [stage for stage in pipeline if stage[0] != item.name]
    if len(kept) == len(pipeline):
        what = "is not in the pipeline" if item.name in known else "names no known pass"
        raise InvalidArgumentError(
            f"pipeline item {item.text!r}: {item.name!r} {what}; the pipeline so far is: "
            f"{_stage_names(pipeline)}; the known names are: {_known_list(known)}"
        )
    pipeline[:] = kept


def _add(pipeline: list[_Stage], item: _Item, stage: _Stage) -> None:
    if item.where is None:
        pipeline.append(stage)
        return
    at = next((i for i, (name, _) in enumerate(pipeline) if name == item.anchor), None)
    if at is None:
        raise InvalidArgumentError(
            f"pipeline item {item.text!r}: no stage called {item.anchor!r} to insert {item.where}; "
            f"the pipeline so far is: {_stage_names(pipeline)}"
        )
    pipeline.insert(at if item.where == "before" else at + 1, stage)


__all__ = ["DEFAULT_PIPELINE", "NAME_RE", "REQUIRED", "PipelineSpec", "parse_spec"]
