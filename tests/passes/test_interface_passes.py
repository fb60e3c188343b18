"""Interface passes (``Pass.interface``): artifact-level forms that may remove graph inputs
and outputs (tract's stateful cache is one). They run last in the pipeline, after the
target's own passes, and ``compile`` gives the artifact the interface the graph has:
graph.nnef declares it, the example inputs follow it, and PyTorch's outputs are dropped
once an input is gone (they were computed with it)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import attrs
import numpy as np
import torch

import t2n
from t2n.ir import Graph
from t2n.passes.base import Pass, PassResult
from t2n.passes.pipeline import compile_pipeline


class TwoHeads(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * 2.0, y + 1.0


@attrs.frozen
class DropSecond(Pass):
    """Removes the second output, what computes it and the input only it reads."""

    name = "drop-second"
    interface = True

    def run(self, graph: Graph) -> PassResult:
        out = graph.outputs[1]
        source = graph.inputs[1]
        info = graph.info
        info.input_names = (info.input_names or ())[:1]
        info.output_names = (info.output_names or ())[:1]
        graph.set_outputs(graph.outputs[:1])
        producer = out.producer
        assert producer is not None
        graph.remove(producer)
        for op in [op for op in graph.ops() if not op.outputs[0].uses and not graph.is_output(op.outputs[0])]:
            graph.remove(op)
        graph.remove_input(source)
        return PassResult(graph, True, {"dropped": 1})


def test_interface_passes_run_after_the_targets_passes() -> None:
    marker = DropSecond()
    pipeline = compile_pipeline([marker, "cleanup"], target_passes=[_Named("target-form")])
    names = [p.display_name for p in pipeline.passes]
    assert names.index("drop-second") > names.index("target-form")


@attrs.frozen
class _Named(Pass):
    label: str

    def run(self, graph: Graph) -> PassResult:
        return PassResult(graph, False)

    @property
    def display_name(self) -> str:
        return self.label


def test_artifact_takes_the_interface_the_passes_left(tmp_path: Path) -> None:
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    artifact = t2n.compile(TwoHeads(), (x, y), input_names=["x", "y"], output_names=["double", "shifted"],
                           passes=[DropSecond()])
    assert (artifact.input_names, artifact.output_names) == (["x"], ["double"])
    assert len(artifact.example_inputs) == 1 and artifact.reference_outputs == []
    artifact.save(tmp_path / "m.nnef.tgz")
    with tarfile.open(tmp_path / "m.nnef.tgz") as tar:
        graph = tar.extractfile("graph.nnef").read().decode()  # type: ignore[union-attr]
    assert "graph main(x) -> (double)" in graph
    report = artifact.check(inputs=[x.numpy()], expected=[(x * 2.0).numpy()])
    assert report.ok and np.isfinite(report.max_abs)
