"""The parts of a plan that act when a model is exported (``compile(remodel=...)``),
before its trace: ``original_shape`` symbol names become dynamic axes, beside
``dynamic_axes`` (which must agree); ``eval_symbols`` are the sizes the example inputs
are given along those axes (the axis is then traced at that size, not made dynamic).
The rest of the plan runs on the compiled graph (:mod:`t2n.driver.remodel`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from t2n.backends.target import Target
from t2n.errors import RemodelPlanError
from t2n.remodel.plan import GraphPlan, as_plan


@attrs.frozen
class RemodelStep:
    """A plan checked for one export."""

    original: GraphPlan
    """The plan as given."""
    plan: GraphPlan
    """The plan the compiled graph gets: ``eval_symbols`` taken out (they size the example
    inputs), their sizes written into ``original_shape``."""
    sizes: Mapping[str, int]
    """``eval_symbols``: symbol → size."""


def remodel_step(remodel: Any) -> RemodelStep | None:
    """The checked plan of ``compile(remodel=...)`` (None when there is none)."""
    if remodel is None:
        return None
    plan = as_plan(remodel)
    if len(plan.graphs) != 1:
        raise RemodelPlanError("", f"compile takes the plan of one graph; this plan is for "
                                   f"{', '.join(plan.names)}: pass remodel=plan['{plan.names[0]}']")
    gp = plan.graph(None)
    sizes = gp.eval_symbols
    inputs = {}
    for name, ip in gp.inputs.items():
        shape = None if ip.original_shape is None else \
            tuple(sizes.get(d, d) if isinstance(d, str) else d for d in ip.original_shape)
        inputs[name] = attrs.evolve(ip, original_shape=shape, eval_symbols={})
    return RemodelStep(gp, attrs.evolve(gp, inputs=inputs), sizes)


def plan_axes(step: RemodelStep | None, axes: Mapping[str, Mapping[int, str]],
              target: Target) -> dict[str, dict[int, str]]:
    """``axes`` with the symbol axes of each ``original_shape`` (not those ``eval_symbols``
    fixes: those leave ``axes`` too)."""
    merged = {k: dict(v) for k, v in axes.items()}
    if step is None:
        return merged
    original = step.original
    for name, ip in original.inputs.items():
        if ip.original_shape is None:
            continue
        key = original.key("inputs", name, "original_shape")
        for i, d in enumerate(ip.original_shape):
            if not isinstance(d, str) or d in step.sizes:
                continue
            prev = merged.setdefault(name, {}).get(i)
            if prev is not None and prev != d:
                raise RemodelPlanError(f"{key}[{i}]", f"axis {i} of {name!r} is {d} here but {prev} in dynamic_axes")
            merged[name][i] = d
        for d in ip.eval_symbols:
            for i, s in list(merged.get(name, {}).items()):
                if s == d:
                    del merged[name][i]
    out = {k: v for k, v in merged.items() if v}
    if out and not target.supports_symbols:
        raise RemodelPlanError(original.key("inputs"), f"original_shape names symbols, and {target} has no "
                                                       "symbolic dimensions; export to TractNNEF")
    return out
