"""The Khronos renderer: standard NNEF computes on real tensors only and has no dynamic
dimensions, so every op that would need either is refused, all at once, before anything
is written."""

from __future__ import annotations

from collections.abc import Collection

from t2n.backends.khronos.emit.index_real import index_only
from t2n.backends.nnef.context import EmitContext
from t2n.backends.nnef.renderer import NNEFRenderer
from t2n.errors import OpProblem
from t2n.ir import DType, Graph

KHRONOS_ANY_TYPE = frozenset(
    ["variable", "const", "identity", "reshape", "transpose", "concat", "slice", "squeeze", "unsqueeze", "tile", "expand", "gather", "gather_elements", "cast", "select", "reverse"]
)
"""IR ops whose standard NNEF form is generic over scalar/integer/logical tensors."""

KHRONOS_LOGICAL = frozenset(["and", "or", "not", "xor", "any_reduce", "all_reduce"])
"""IR ops that standard NNEF defines on logical tensors."""


def khronos_type_problems(graph: Graph, emittable: Collection[str] | None = None) -> list[OpProblem]:
    """Standard NNEF computes only on ``scalar`` (real) tensors: integer arithmetic,
    comparisons of integers and the like have no standard form, except on values that
    only serve as gather indices (written on reals). Ops outside ``emittable`` (no
    Khronos form at all) are left out: they are reported once, as such."""
    problems = []
    memo: dict[int, bool] = {}
    for op in graph.ops():
        if op.kind in KHRONOS_ANY_TYPE or (emittable is not None and op.kind not in emittable):
            continue
        if op.kind not in KHRONOS_LOGICAL and all(index_only(graph, o, memo) for o in op.outputs):
            continue  # index arithmetic: written on reals (emit/index_real.py)
        operands = op.inputs[1:] if op.kind == "gather" else op.inputs
        if op.kind in KHRONOS_LOGICAL:
            bad = [v for v in operands if v.type.dtype is not DType.BOOL]
        else:
            bad = [v for v in operands if not v.type.dtype.is_float]
        if bad:
            problems.append(OpProblem(
                op.loc.aten or op.kind, op.loc.module, op.loc.source,
                f"'{op.kind}' on {bad[0].type.dtype} tensors: standard NNEF defines it only on "
                f"{'logical' if op.kind in KHRONOS_LOGICAL else 'scalar (real)'} tensors",
            ))
    return problems


class KhronosRenderer(NNEFRenderer):
    flavour = "Khronos NNEF"

    def check_graph(self, graph: Graph) -> list[OpProblem]:
        problems = khronos_type_problems(graph, self.emitters)
        for v in graph.inputs:
            if not v.type.shape.is_static:
                problems.append(OpProblem(
                    "input", "", "",
                    f"input '{v.name}' has symbolic shape {v.type.shape}; Khronos NNEF has no "
                    "dynamic dimensions (export to TractNNEF, or drop dynamic_axes)",
                ))
        return problems

    def header_extensions(self, ctx: EmitContext, graph: Graph) -> list[str]:
        if ctx.fragments:
            return ["KHR_enable_fragment_definitions", "KHR_enable_operator_expressions"]
        return []
