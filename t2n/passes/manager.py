"""PassManager: runs a pipeline once or to a bounded fixed point, verifying as asked."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence

import attrs

from t2n.errors import PassError, T2NError
from t2n.ir import Graph, IRVerificationError, print_graph, verify
from t2n.passes.base import Pass, PassResult

log = logging.getLogger("t2n.passes")

DumpFn = Callable[[str, Graph], None]


@attrs.frozen
class PassManager(Pass):
    """Run ``passes`` in order; with ``fixed_point`` repeat sweeps until none changes
    anything, at most ``max_sweeps`` times. Itself a Pass, so pipelines nest.

    ``verify_each`` checks the IR after every pass (always on in tests); ``dump``
    receives ``(label, graph)`` after each pass that changed something.
    """

    passes: Sequence[Pass]
    fixed_point: bool = False
    max_sweeps: int = 8
    verify_each: bool = False
    dump: DumpFn | None = None
    label: str = "pipeline"

    name = "pass-manager"

    @property
    def display_name(self) -> str:
        return self.label

    def run(self, graph: Graph) -> PassResult:
        stats: Counter[str] = Counter()
        history: list[str] = []
        modified = False
        sweeps = self.max_sweeps if self.fixed_point else 1
        for sweep in range(sweeps):
            changed = False
            for p in self.passes:
                result = self._run_one(p, graph, history)
                graph = result.graph
                for k, v in result.stats.items():
                    stats[f"{p.display_name}.{k}"] += v
                if result.modified:
                    changed = True
                    if self.dump is not None:
                        self.dump(f"{len(history):03d}-{p.display_name}", graph)
            modified |= changed
            if not changed:
                break
            if self.fixed_point and sweep == sweeps - 1:
                raise PassError(
                    f"{self.label}: no fixed point after {sweeps} sweeps; still changing: "
                    + ", ".join(history[-len(self.passes):]),
                    pass_name=self.label,
                    previous=tuple(history),
                )
        stats["sweeps"] = min(sweep + 1, sweeps)
        return PassResult(graph, modified, dict(stats))

    def _run_one(self, p: Pass, graph: Graph, history: list[str]) -> PassResult:
        try:
            result = p(graph)
        except T2NError:
            raise
        except Exception as exc:
            raise PassError(
                f"pass {p.display_name} failed: {type(exc).__name__}: {exc}",
                pass_name=p.display_name,
                previous=tuple(history),
            ) from exc
        history.append(p.display_name)
        log.debug("pass %s: modified=%s %s", p.display_name, result.modified, dict(result.stats))
        if self.verify_each:
            try:
                verify(result.graph)
            except IRVerificationError as exc:
                raise PassError(
                    f"pass {p.display_name} left an invalid graph: {exc}\n{print_graph(result.graph)}",
                    pass_name=p.display_name,
                    previous=tuple(history),
                ) from exc
        return result
