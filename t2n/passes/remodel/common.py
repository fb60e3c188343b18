"""What the remodel passes share: finding a graph input or output by the name the
artifact gives it, and keeping those names in step when the interface changes."""

from __future__ import annotations

from t2n.errors import RemodelPlanError
from t2n.ir import Graph, Value


def input_names(graph: Graph) -> list[str]:
    return list(graph.info.input_names or [v.name for v in graph.inputs])


def output_names(graph: Graph) -> list[str]:
    return list(graph.info.output_names or [v.name for v in graph.outputs])


def find_input(graph: Graph, name: str, key: str) -> Value:
    names = input_names(graph)
    if name not in names:
        raise RemodelPlanError(key, f"the graph has no input {name!r} (its inputs: {', '.join(names)})")
    return graph.inputs[names.index(name)]


def output_index(graph: Graph, name: str, key: str) -> int:
    names = output_names(graph)
    if name not in names:
        raise RemodelPlanError(key, f"the graph has no output {name!r} (its outputs: {', '.join(names)})")
    return names.index(name)


def norm_axes(axes: tuple[int, ...], rank: int, key: str) -> list[int]:
    out: list[int] = []
    for a in axes:
        if not -rank <= a < rank:
            raise RemodelPlanError(key, f"axis {a} is out of range for rank {rank}")
        out.append(a % rank)
    if len(set(out)) != len(out):
        raise RemodelPlanError(key, f"names an axis twice: {list(axes)}")
    return sorted(out)
