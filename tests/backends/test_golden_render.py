"""Renderer golden tests: a small IR graph in, the exact graph.nnef text out, per target.

Each ``golden/NAME.ir`` holds a graph in the IR's printed form; ``NAME.tract.nnef`` and
``NAME.khronos.nnef`` hold what ``TractNNEF()`` and ``KhronosNNEF()`` render from it
(or, where a target refuses the graph, ``# refused: <error type>: <message>``).
After an intended change of the output, regenerate the expected files and review
them with ``git diff tests/backends/golden``::

    python -m tests.backends.test_golden_render      (from the repository root)
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from t2n.backends.khronos.target import KhronosNNEF
from t2n.backends.target import Target
from t2n.backends.tract.target import TractNNEF
from t2n.errors import T2NError
from t2n.ir import parse_graph

GOLDEN = Path(__file__).parent / "golden"
TARGETS: dict[str, Target] = {"tract": TractNNEF(), "khronos": KhronosNNEF()}
CASES = sorted(p.stem for p in GOLDEN.glob("*.ir"))


def render(case: str, target: Target) -> str:
    """The text a target renders for a case, or the refusal it raises."""
    graph = parse_graph((GOLDEN / f"{case}.ir").read_text())
    try:
        return target.renderer().render(graph).graph_nnef
    except T2NError as exc:
        return f"# refused: {type(exc).__name__}: {exc}\n"


def expected_path(case: str, target_name: str) -> Path:
    return GOLDEN / f"{case}.{target_name}.nnef"


def test_cases_cover_the_representative_ops() -> None:
    assert {"conv", "matmul", "reshape_symbol", "slice", "mean_reduce", "cast", "softmax",
            "erf", "gelu"} <= set(CASES)
    stray = {p.name for p in GOLDEN.glob("*.nnef")} - {
        expected_path(c, t).name for c in CASES for t in TARGETS}
    assert not stray, f"golden files with no .ir case: {sorted(stray)}"


@pytest.mark.parametrize("target_name", sorted(TARGETS))
@pytest.mark.parametrize("case", CASES)
def test_rendered_text_is_golden(case: str, target_name: str) -> None:
    path = expected_path(case, target_name)
    assert path.exists(), f"{path.name} missing: run python -m tests.backends.test_golden_render"
    assert render(case, TARGETS[target_name]) == path.read_text()


def main() -> None:
    """Rewrite every expected file from the current renderer."""
    for case in CASES:
        for name, target in TARGETS.items():
            expected_path(case, name).write_text(render(case, target))
    print(f"wrote {len(CASES) * len(TARGETS)} files in {GOLDEN}", file=sys.stderr)


if __name__ == "__main__":
    main()
