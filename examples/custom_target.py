"""A user target: tract, with one op rendered its own way, run in this process.

Run it:  python examples/custom_target.py

A target says how a graph is rendered (its emitter table, its renderer) and how an
artifact is run (``run(path, inputs)``); ``Artifact.check`` calls that ``run`` and
compares with PyTorch. Here a subclass of ``TractNNEF``:

* writes ``sigmoid`` as ``1 / (1 + exp(-x))`` instead of tract's ``sigmoid`` (its
  built-in emitter table with one entry replaced);
* runs the artifact with tract's Python package in this very process (t2n's own
  targets run it in a worker process, so that a crash in the engine is reported
  instead of ending Python).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

import attrs
import numpy as np
import torch

import t2n
from t2n.backends.nnef.context import EmitContext, Emitter, Raw
from t2n.ir import Op


def sigmoid_from_exp(ctx: EmitContext, op: Op) -> None:
    x = op.inputs[0]
    denominator = ctx.emit("sig_den", "add", Raw(ctx.call("exp", Raw(ctx.call("neg", x)))), 1.0)
    ctx.emit(op.output, "div", 1.0, Raw(denominator))


@attrs.frozen
class InProcessTract(t2n.TractNNEF):
    """tract's NNEF dialect; sigmoid spelled out; run by tract's Python package here."""

    name: ClassVar[str] = "tract-in-process"

    def builtin_emitters(self) -> Mapping[str, Emitter]:
        return {**super().builtin_emitters(), "sigmoid": sigmoid_from_exp}

    def run(self, path: Path, inputs: Sequence[np.ndarray], *, registries: Sequence[str] = (),
            symbols: Mapping[str, int] | None = None) -> list[np.ndarray]:
        import tract

        loader = tract.nnef()
        for registry in registries:
            if registry == "tract_transformers":
                loader = loader.with_tract_transformers()
            elif registry != "tract_core":
                raise t2n.errors.EngineError(f"{self.engine} cannot load the registry {registry!r}")
        model = loader.load(str(path))
        if symbols:
            model.transform(tract.SetSymbols(dict(symbols)))
        outputs = model.into_runnable().run([np.require(x, requirements="C") for x in inputs])
        return [o.to_numpy() for o in outputs]

    @property
    def engine(self) -> str:
        return f"tract {self.version} (in process)"


class Gate(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(self.lin(x))


def main() -> t2n.Artifact:
    torch.manual_seed(0)
    artifact = t2n.compile(Gate().eval(), (torch.randn(4, 8),), InProcessTract())
    print(artifact.graph_nnef)
    print(artifact.check())
    return artifact


if __name__ == "__main__":
    main()
