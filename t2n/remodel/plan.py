"""Remodel plans: what to change at a graph's boundary, in the shape-config format of the
widely used exporter's remodeler, so that its users' files work here.

A plan is a mapping (YAML or JSON) for one graph, or a mapping from sub-network name to
such mappings. Per graph::

    inputs:
      audio:                                   # an input name
        original_shape: [1, 80, T]             # ints and symbol names, checked against the graph
        collapse_dims: [0]                     # axes (or symbol names) of size 1 to remove
        eval_symbols: {T: 16}                  # symbols fixed to these sizes
      length:
        bind_scalar_to_dim_size: audio.2       # "<input>.<axis or symbol>": the input goes,
                                               # every reader gets that size instead
    outputs:
      logits: {collapse_dims: [0]}             # size-1 axes removed from an output
    renamed_symbols: {frames: [T]}             # new name: [old names] (several merge into one)
    outputs_keep: [logits]                     # only these outputs, in this order
    extensions: ["tract_assert frames <= 4096"]

Axes refer to the shapes before the plan (``original_shape``), negative ones counting
from the end. Symbol names are matched exactly, then ignoring case (the other exporter
writes them in capitals). Every mistake is a :class:`~t2n.errors.RemodelPlanError`
naming the key (``encoder.inputs.audio.collapse_dims[1]``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from t2n.backends.nnef.extensions import check_custom_extensions
from t2n.errors import InvalidArgumentError, RemodelPlanError
from t2n.ir.dims import valid_symbol_name

GRAPH_KEYS = ("inputs", "outputs", "renamed_symbols", "outputs_keep", "extensions")
INPUT_KEYS = ("original_shape", "collapse_dims", "bind_scalar_to_dim_size", "eval_symbols")
OUTPUT_KEYS = ("collapse_dims",)

Axis = int | str
"""An axis by position (negative counts from the end) or by the symbol it carries."""


@attrs.frozen
class InputPlan:
    original_shape: tuple[int | str, ...] | None = None
    collapse_dims: tuple[Axis, ...] = ()
    bind_scalar_to_dim_size: tuple[str, Axis] | None = None
    """(source input, axis of the source)."""
    eval_symbols: Mapping[str, int] = attrs.field(factory=dict)


@attrs.frozen
class OutputPlan:
    collapse_dims: tuple[Axis, ...] = ()


@attrs.frozen
class GraphPlan:
    """The plan of one graph; ``where`` prefixes the keys in error messages."""

    inputs: Mapping[str, InputPlan] = attrs.field(factory=dict)
    outputs: Mapping[str, OutputPlan] = attrs.field(factory=dict)
    renamed_symbols: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    outputs_keep: tuple[str, ...] | None = None
    extensions: tuple[str, ...] = ()
    where: str = ""

    def key(self, *parts: object) -> str:
        text = ".".join(str(p) for p in ((self.where,) if self.where else ()) + tuple(
            p for p in parts if not (isinstance(p, str) and p.startswith("["))))
        return text + "".join(str(p) for p in parts if isinstance(p, str) and p.startswith("["))

    @property
    def eval_symbols(self) -> dict[str, int]:
        """Every ``eval_symbols`` entry of every input (a symbol is one size graph-wide)."""
        out: dict[str, int] = {}
        for name, ip in self.inputs.items():
            for sym, size in ip.eval_symbols.items():
                if out.get(sym, size) != size:
                    raise RemodelPlanError(self.key("inputs", name, "eval_symbols", sym),
                                           f"{sym} is given the sizes {out[sym]} and {size}")
                out[sym] = size
        return out

    @property
    def is_empty(self) -> bool:
        return not (self.inputs or self.outputs or self.renamed_symbols or self.outputs_keep is not None
                    or self.extensions)


@attrs.frozen
class RemodelPlan:
    """A plan for one graph (``graphs`` has the key ``""``) or for named sub-networks."""

    graphs: Mapping[str, GraphPlan]

    @property
    def names(self) -> list[str]:
        return [n for n in self.graphs if n]

    def graph(self, name: str | None = None) -> GraphPlan:
        """The plan of sub-network ``name`` (None: the only one there is)."""
        if name is None:
            if len(self.graphs) == 1:
                return next(iter(self.graphs.values()))
            raise RemodelPlanError("", f"this plan is for several sub-networks ({', '.join(self.names)}); "
                                       "say which one (subnet=..., or --subnet on the command line)")
        if name in self.graphs:
            return self.graphs[name]
        if "" in self.graphs:
            return self.graphs[""]
        raise RemodelPlanError("", f"no sub-network {name!r} in this plan (it has {', '.join(self.names)})")

    def __getitem__(self, name: str) -> GraphPlan:
        return self.graph(name)

    @classmethod
    def from_mapping(cls, data: Any) -> RemodelPlan:
        if not isinstance(data, Mapping):
            raise RemodelPlanError("", f"a plan is a mapping, got {type(data).__name__}")
        keys = [str(k) for k in data]
        if not keys or any(k in GRAPH_KEYS for k in keys):
            unknown = [k for k in keys if k not in GRAPH_KEYS]
            if unknown:
                raise RemodelPlanError(unknown[0], f"unknown key (a graph's plan has {', '.join(GRAPH_KEYS)}; "
                                                   "a multi-graph plan maps sub-network names to such plans)")
            return cls({"": _graph(data, "")})
        return cls({str(k): _graph(v, str(k)) for k, v in data.items()})

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> RemodelPlan:
        """A plan from a ``.json`` file, or a ``.yaml``/``.yml`` one (needs PyYAML:
        ``pip install t2n[remodel]``)."""
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as exc:
            raise InvalidArgumentError(f"cannot read the remodel plan {p}: {exc}") from exc
        return cls.from_mapping(parse_plan_text(text, p.suffix.lower(), str(p)))


def parse_plan_text(text: str, suffix: str, source: str = "<plan>") -> Any:
    if suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise RemodelPlanError("", f"{source} is not JSON: {exc}") from exc
    if suffix not in (".yaml", ".yml"):
        raise RemodelPlanError("", f"{source}: a plan file ends in .yaml, .yml or .json")
    try:
        import yaml
    except ImportError:
        raise InvalidArgumentError(
            f"{source} is YAML, which needs PyYAML: pip install 't2n[remodel]' (or pyyaml), "
            "or write the plan as JSON") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RemodelPlanError("", f"{source} is not YAML: {exc}") from exc


def as_plan(plan: Any) -> RemodelPlan:
    """A :class:`RemodelPlan` from a plan, a :class:`GraphPlan`, a mapping or a file path."""
    if isinstance(plan, RemodelPlan):
        return plan
    if isinstance(plan, GraphPlan):
        return RemodelPlan({"": plan})
    if isinstance(plan, (str, os.PathLike)):
        return RemodelPlan.load(plan)
    if isinstance(plan, Mapping):
        return RemodelPlan.from_mapping(plan)
    raise InvalidArgumentError(f"a remodel plan is a RemodelPlan, a mapping or the path of a YAML/JSON "
                               f"file, got {type(plan).__name__}")


# -- validation of each key ------------------------------------------------------------


def _where(*parts: str) -> str:
    return ".".join(p for p in parts if p)


def _mapping(value: Any, key: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise RemodelPlanError(key, f"must be a mapping with names as keys, got {value!r}")
    return value


def _known_keys(value: Mapping[str, Any], allowed: Sequence[str], key: str) -> None:
    for k in value:
        if k not in allowed:
            raise RemodelPlanError(_where(key, k), f"unknown key (allowed here: {', '.join(allowed)})")


def _graph(data: Any, where: str) -> GraphPlan:
    data = _mapping(data, where or "plan")
    _known_keys(data, GRAPH_KEYS, where)
    inputs = {name: _input(v, _where(where, "inputs", name)) for name, v in
              _mapping(data.get("inputs"), _where(where, "inputs")).items()}
    outputs = {name: _output(v, _where(where, "outputs", name)) for name, v in
               _mapping(data.get("outputs"), _where(where, "outputs")).items()}
    renamed = _renames(data.get("renamed_symbols"), _where(where, "renamed_symbols"))
    keep = data.get("outputs_keep")
    if keep is not None:
        keep = tuple(_names(keep, _where(where, "outputs_keep")))
        if not keep:
            raise RemodelPlanError(_where(where, "outputs_keep"), "keeps no output")
    ext = data.get("extensions") or []
    key = _where(where, "extensions")
    if isinstance(ext, str) or not isinstance(ext, Sequence):
        raise RemodelPlanError(key, f"must be a list of extension lines, got {ext!r}")
    try:
        lines = check_custom_extensions(list(ext), allowed=True, where=key)
    except InvalidArgumentError as exc:
        raise RemodelPlanError(key, str(exc)) from None
    return GraphPlan(inputs, outputs, renamed, keep, lines, where)


def _names(value: Any, key: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise RemodelPlanError(key, f"must be a list of names, got {value!r}")
    if len(set(value)) != len(value):
        raise RemodelPlanError(key, f"names an entry twice: {list(value)}")
    return list(value)


def _axes(value: Any, key: str) -> tuple[Axis, ...]:
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, Sequence):
        raise RemodelPlanError(key, f"must be a list of axes (ints) or symbol names, got {value!r}")
    out: list[Axis] = []
    for i, a in enumerate(value):
        if isinstance(a, bool) or not isinstance(a, (int, str)):
            raise RemodelPlanError(f"{key}[{i}]", f"an axis is an int or a symbol name, got {a!r}")
        if isinstance(a, str) and not valid_symbol_name(a):
            raise RemodelPlanError(f"{key}[{i}]", f"{a!r} is not a symbol name")
        out.append(a)
    return tuple(out)


def _input(data: Any, key: str) -> InputPlan:
    data = _mapping(data, key)
    _known_keys(data, INPUT_KEYS, key)
    shape = data.get("original_shape")
    if shape is not None:
        if isinstance(shape, str) or not isinstance(shape, Sequence):
            raise RemodelPlanError(_where(key, "original_shape"), f"must be a list of ints and symbol names, got {shape!r}")
        for i, d in enumerate(shape):
            bad = isinstance(d, bool) or not isinstance(d, (int, str)) or (isinstance(d, int) and d < 0) \
                or (isinstance(d, str) and not valid_symbol_name(d))
            if bad:
                raise RemodelPlanError(f"{_where(key, 'original_shape')}[{i}]",
                                       f"a size is a non-negative int or a symbol name, got {d!r}")
        shape = tuple(shape)
    bind = data.get("bind_scalar_to_dim_size")
    bound: tuple[str, Axis] | None = None
    if bind is not None:
        k = _where(key, "bind_scalar_to_dim_size")
        if not isinstance(bind, str) or "." not in bind:
            raise RemodelPlanError(k, f"must be the text '<input>.<axis>' (an axis index or symbol name), got {bind!r}")
        source, _, axis = bind.rpartition(".")
        axis_v: Axis = int(axis) if axis.lstrip("-").isdigit() else axis
        if isinstance(axis_v, str) and not valid_symbol_name(axis_v):
            raise RemodelPlanError(k, f"{axis!r} is neither an axis index nor a symbol name")
        bound = (source, axis_v)
    evals = _mapping(data.get("eval_symbols"), _where(key, "eval_symbols"))
    for s, n in evals.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise RemodelPlanError(_where(key, "eval_symbols", s), f"a size is a positive int, got {n!r}")
        if not valid_symbol_name(s):
            raise RemodelPlanError(_where(key, "eval_symbols", s), "is not a symbol name")
    collapse = _axes(data.get("collapse_dims") or [], _where(key, "collapse_dims"))
    return InputPlan(shape, collapse, bound, dict(evals))


def _output(data: Any, key: str) -> OutputPlan:
    data = _mapping(data, key)
    _known_keys(data, OUTPUT_KEYS, key)
    return OutputPlan(_axes(data.get("collapse_dims") or [], _where(key, "collapse_dims")))


def _renames(data: Any, key: str) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    seen: dict[str, str] = {}
    for new, olds in _mapping(data, key).items():
        k = _where(key, new)
        if not valid_symbol_name(new):
            raise RemodelPlanError(k, f"{new!r} is not a symbol name (letters, digits and _)")
        olds_list = [olds] if isinstance(olds, str) else olds
        names = tuple(_names(olds_list, k))
        for o in names:
            if not valid_symbol_name(o):
                raise RemodelPlanError(k, f"{o!r} is not a symbol name")
            if o in seen:
                raise RemodelPlanError(k, f"{o} is already renamed to {seen[o]}")
            seen[o] = new
        out[new] = names
    return out
