"""PassManager: runs a pipeline once or to a bounded fixed point, verifying as asked."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable

import attrs

from t2n.errors import InvalidArgumentError, PassError, T2NError
from t2n.ir import Graph, IRVerificationError, print_graph, verify
from t2n.passes.base import Pass, PassResult

log = logging.getLogger("t2n.passes")

DumpFn = Callable[[str, Graph], None]


def _pass_tuple(passes: Iterable[Pass]) -> tuple[Pass, ...]:
    if isinstance(passes, (Pass, str, bytes)):
        raise InvalidArgumentError(f"PassManager takes a list of Pass objects, got {passes!r}")
    out = tuple(passes)
    for i, p in enumerate(out):
        if not isinstance(p, Pass):
            raise InvalidArgumentError(f"PassManager passes[{i}] = {p!r} is not a t2n.Pass")
    return out


def _check_sweeps(_self: object, _attr: object, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidArgumentError(
            f"PassManager max_sweeps must be an int of at least 1 (the sweep that finds "
            f"nothing left to change counts), got {value!r}"
        )


@attrs.frozen
class PassManager(Pass):
    """Run ``passes`` in order; with ``fixed_point`` repeat sweeps until none changes
    anything, at most ``max_sweeps`` times. Itself a Pass, so pipelines nest.

    ``max_sweeps`` is at least 1 (0 or less is an :class:`InvalidArgumentError` when the
    manager is made): in ``fixed_point`` mode the last allowed sweep must change
    nothing, else a :class:`PassError` names the passes still changing; so
    ``max_sweeps=1`` accepts only a graph that is already at its fixed point. Without
    ``fixed_point`` the passes run once and ``max_sweeps`` is not used. An empty
    pipeline runs nothing: the graph comes back as it was, ``modified=False``,
    ``stats == {"sweeps": 0}``.

    ``verify_each`` checks the IR after every pass (always on in tests); ``dump``
    receives ``(label, graph)`` after each pass that changed something.
    """

    passes: tuple[Pass, ...] = attrs.field(converter=_pass_tuple)
    fixed_point: bool = False
    max_sweeps: int = attrs.field(default=8, validator=_check_sweeps)
    verify_each: bool = False
    dump: DumpFn | None = None
    label: str = "pipeline"

    name = "pass-manager"

    @property
    def display_name(self) -> str:
        return self.label

    def run(self, graph: Graph) -> PassResult:
        stats: Counter[str] = Counter()
        if not self.passes:
            return PassResult(graph, False, {"sweeps": 0})
        history: list[str] = []
        modified = False
        sweeps = self.max_sweeps if self.fixed_point else 1
        sweep = 0
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
        stats["sweeps"] = sweep + 1
        return PassResult(graph, modified, dict(stats))

    def _run_one(self, p: Pass, graph: Graph, history: list[str]) -> PassResult:
        try:
            result = p(graph)
        except PassError as exc:
            if exc.pass_name != p.display_name or exc.previous or not history:
                raise
            raise PassError(str(exc), pass_name=exc.pass_name, previous=tuple(history)) from exc
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
