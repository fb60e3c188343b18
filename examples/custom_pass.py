"""A user pass: fuse ``x * sigmoid(x)`` into one ``silu`` op.

Run it:  python examples/custom_pass.py

A pass is a small frozen attrs class with a ``name`` and a ``run(graph)`` that edits
the graph only through its API (``create_op``, ``replace_all_uses_with``, ``remove``)
and returns ``PassResult(graph, modified, stats)``; ``modified`` must be true exactly
when it edited the graph (``Pass.__call__`` checks it against ``graph.edits``). It may
also define ``requires(graph)`` / ``ensures(graph)`` checks.

``compile(..., passes=[FuseSiLU()])`` runs it after the built-in passes and cleans up
after it, so a pass may leave dead ops behind. The pipeline can also be given by
name, with the pass placed where it should run::

    t2n.compile(model, args, passes="default,+fuse-silu@before:fold-batch-norm",
                pass_registry={"fuse-silu": FuseSiLU()})

(``-fold-batch-norm`` removes a built-in pass; see ``t2n.passes.spec``.)
"""

from __future__ import annotations

import attrs
import torch

import t2n
from t2n.ir import Graph
from t2n.passes import Pass, PassResult


@attrs.frozen
class FuseSiLU(Pass):
    """mul(x, sigmoid(x)) or mul(sigmoid(x), x) → silu(x)."""

    name = "fuse-silu"

    def run(self, graph: Graph) -> PassResult:
        fused = 0
        for op in graph.ops():
            if op not in graph or op.kind != "mul":
                continue
            a, b = op.inputs
            for x, s in ((a, b), (b, a)):
                sig = s.producer
                if sig is not None and sig.kind == "sigmoid" and sig.inputs[0] is x:
                    silu = graph.create_op("silu", [x], names=[op.output.name + "_silu"], loc=op.loc)
                    graph.replace_all_uses_with(op.output, silu.output)
                    graph.remove(op)
                    fused += 1
                    break
        return PassResult(graph, fused > 0, {"fused": fused})


class Swish(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        return h * torch.sigmoid(h)


def main() -> t2n.Artifact:
    artifact = t2n.compile(Swish(), (torch.randn(2, 8),), passes="default,+fuse-silu@before:fold-batch-norm",
                           pass_registry={"fuse-silu": FuseSiLU()}, verify_ir=True)
    print(artifact.ir)
    print("pass stats:", artifact.stats["pass_stats"])
    print(artifact.check())
    return artifact


if __name__ == "__main__":
    main()
