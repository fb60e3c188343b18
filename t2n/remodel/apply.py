"""A plan as passes: names in the plan (axes given as symbols, sub-network prefixes,
symbols in another case) resolved against the graph as it is before the plan, then the
boundary passes of :mod:`t2n.passes.remodel` in their order."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from t2n.errors import RemodelPlanError
from t2n.ir import Graph, Sym
from t2n.passes.base import Pass, PassResult
from t2n.passes.manager import PassManager
from t2n.passes.remodel import (
    AddExtensions,
    BindScalarToDimSize,
    CheckOriginalShape,
    CollapseInputDims,
    CollapseOutputDims,
    EvalSymbols,
    KeepOutputs,
    PruneAssertions,
    RenameSymbols,
)
from t2n.passes.remodel.common import find_input, input_names, output_index
from t2n.passes.remodel.symbols import graph_symbols
from t2n.remodel.check import IOMap
from t2n.remodel.interface import Interface, graph_interface
from t2n.remodel.plan import Axis, GraphPlan, as_plan


def resolve_symbol(name: str, present: Iterable[str], key: str) -> str:
    """``name`` as the graph spells it: the same, or the one symbol equal ignoring case."""
    present = sorted(present)
    if name in present:
        return name
    close = [s for s in present if s.lower() == name.lower()]
    if len(close) == 1:
        return close[0]
    raise RemodelPlanError(key, f"the graph has no symbol {name} (its symbols: {', '.join(present) or 'none'})")


class _Resolver:
    def __init__(self, graph: Graph, plan: GraphPlan) -> None:
        self.graph = graph
        self.plan = plan
        self.symbols = graph_symbols(graph)
        self.aliases = {new: olds for new, olds in plan.renamed_symbols.items()}

    def axis(self, shape: tuple[Any, ...], axis: Axis, what: str, key: str) -> int:
        """The index of ``axis`` in ``shape``: an int as given, a symbol name where that
        symbol (or one the plan renames to it) is the whole size of an axis."""
        if isinstance(axis, int):
            return axis
        names = {axis} | set(self.aliases.get(axis, ()))
        found = [i for i, d in enumerate(shape) if isinstance(d, Sym)
                 and any(str(d) == n or str(d).lower() == n.lower() for n in names)]
        if len(found) != 1:
            dims = ", ".join(str(d) for d in shape)
            raise RemodelPlanError(key, f"{what} has {'no' if not found else 'several'} axis {axis} "
                                        f"(its shape: [{dims}])")
        return found[0]

    def source(self, name: str, key: str) -> str:
        """A bind source, possibly written ``subnet.input``."""
        names = input_names(self.graph)
        if name in names:
            return name
        _, _, tail = name.partition(".")
        if tail in names:
            return tail
        raise RemodelPlanError(key, f"the graph has no input {name!r} (its inputs: {', '.join(names)})")

    def symbol(self, name: str, key: str) -> str:
        return resolve_symbol(name, self.symbols, key)


def plan_passes(graph: Graph, plan: GraphPlan) -> list[Pass]:
    """The passes that carry out ``plan`` on ``graph`` (names resolved now, against the
    graph as it is before any of them runs)."""
    r = _Resolver(graph, plan)
    checks: list[Pass] = []
    collapses: list[Pass] = []
    collapsed: dict[str, list[int]] = {}
    evals: dict[str, int] = {}
    for name, ip in plan.inputs.items():
        shape = tuple(find_input(graph, name, plan.key("inputs", name)).type.shape)
        if ip.original_shape is not None:
            checks.append(CheckOriginalShape(name, ip.original_shape, plan.key("inputs", name, "original_shape")))
        if ip.collapse_dims:
            collapse, collapsed[name] = _collapse_input(r, name, ip.collapse_dims, shape)
            collapses.append(collapse)
        for sym, size in ip.eval_symbols.items():
            _add_eval_symbol(r, name, shape, sym, size, evals)
    binds: list[Pass] = [_bind(r, name, ip.bind_scalar_to_dim_size, collapsed)
                         for name, ip in plan.inputs.items() if ip.bind_scalar_to_dim_size is not None]
    return checks + collapses + binds + _output_passes(r) + _late_passes(r, evals) + [PruneAssertions()]


def _collapse_input(r: _Resolver, name: str, dims: Iterable[Axis],
                    shape: tuple[Any, ...]) -> tuple[Pass, list[int]]:
    """The pass that collapses ``dims`` of input ``name``, and those axes made non-negative."""
    key = r.plan.key("inputs", name, "collapse_dims")
    axes = tuple(r.axis(shape, a, f"input {name!r}", key) for a in dims)
    return (CollapseInputDims(name, axes, key),
            [a % len(shape) if -len(shape) <= a < len(shape) else a for a in axes])


def _add_eval_symbol(r: _Resolver, name: str, shape: tuple[Any, ...], sym: str, size: int,
                     evals: dict[str, int]) -> None:
    """Record ``sym = size`` from input ``name``'s plan in ``evals``, once per symbol."""
    key = r.plan.key("inputs", name, "eval_symbols", sym)
    s = r.symbol(sym, key)
    if not any(isinstance(d, Sym) and s in d.symbols() for d in shape):
        raise RemodelPlanError(key, f"input {name!r} ({[str(d) for d in shape]}) has no axis {sym}")
    if evals.get(s, size) != size:
        raise RemodelPlanError(key, f"{s} is given the sizes {evals[s]} and {size}")
    evals[s] = size


def _bind(r: _Resolver, name: str, bind: tuple[str, Axis], collapsed: dict[str, list[int]]) -> Pass:
    """The pass binding scalar input ``name`` to an axis size of another input, counted
    after the collapses (an axis of the source counts without its collapsed ones)."""
    key = r.plan.key("inputs", name, "bind_scalar_to_dim_size")
    src_name = r.source(bind[0], key)
    src = find_input(r.graph, src_name, key)
    rank = src.rank
    axis = r.axis(tuple(src.type.shape), bind[1], f"input {src_name!r}", key)
    axis = axis % rank if -rank <= axis < rank else axis
    gone = collapsed.get(src_name, [])
    if axis in gone:
        raise RemodelPlanError(key, f"axis {axis} of {src_name!r} is collapsed away; bind to another axis")
    return BindScalarToDimSize(name, src_name, axis - sum(1 for g in gone if g < axis), key)


def _output_passes(r: _Resolver) -> list[Pass]:
    """The outputs' collapses, then the choice of outputs kept."""
    plan = r.plan
    out_passes: list[Pass] = []
    for name, op in plan.outputs.items():
        if op.collapse_dims:
            key = plan.key("outputs", name, "collapse_dims")
            v = r.graph.outputs[output_index(r.graph, name, key)]
            axes = tuple(r.axis(tuple(v.type.shape), a, f"output {name!r}", key) for a in op.collapse_dims)
            out_passes.append(CollapseOutputDims(name, axes, key))
    if plan.outputs_keep is not None:
        key = plan.key("outputs_keep")
        for n in plan.outputs_keep:
            output_index(r.graph, n, key)
        out_passes.append(KeepOutputs(tuple(plan.outputs_keep), key))
    return out_passes


def _late_passes(r: _Resolver, evals: dict[str, int]) -> list[Pass]:
    """What runs once the boundary is settled: sizes fixed, symbols renamed, extensions."""
    plan = r.plan
    late: list[Pass] = []
    if evals:
        late.append(EvalSymbols(evals, plan.key("inputs", "eval_symbols")))
    if plan.renamed_symbols:
        key = plan.key("renamed_symbols")
        renames = {r.symbol(old, f"{key}.{new}"): new for new, olds in plan.renamed_symbols.items() for old in olds}
        late.append(RenameSymbols(renames, key))
    if plan.extensions:
        late.append(AddExtensions(tuple(plan.extensions), plan.key("extensions")))
    return late


@attrs.frozen
class Remodelled:
    """What a plan did to a graph: the passes it ran (names resolved), their result
    (``result.stats`` counts what each changed), and the interface before and after."""

    passes: tuple[Pass, ...]
    result: PassResult
    before: Interface
    after: Interface

    def io_map(self) -> IOMap:
        """How inputs and outputs of the graph before relate to those after."""
        return IOMap.of(self.passes, self.before, self.after)


def apply_plan(graph: Graph, plan: Any, *, subnet: str | None = None, verify_each: bool = False) -> Remodelled:
    """Carry out ``plan`` (a plan, mapping or file; ``subnet`` picks a sub-network's) on
    ``graph`` in place."""
    gp = plan if isinstance(plan, GraphPlan) else as_plan(plan).graph(subnet)
    before = graph_interface(graph)
    passes = plan_passes(graph, gp) if not gp.is_empty else []
    result = PassManager(passes, verify_each=verify_each, label="remodel")(graph)
    return Remodelled(tuple(passes), result, before, graph_interface(graph))
