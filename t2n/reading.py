"""``t2n.read``: an NNEF artifact on disk back in the IR, ready for passes (a remodel
plan, a user's pass), then written again or run.

```python
model = t2n.read("encoder.nnef.tgz")          # a folder, .tar or .tgz
print(model.interface())                       # inputs and outputs, symbolic shapes, assertions
model.remodel("plan.yaml")                     # boundary passes (see t2n.passes.remodel)
model.save("encoder_app.nnef.tgz")
outs = model.run([x])                          # in the target's engine (tract)
```

Reading is the inverse of rendering: a t2n artifact read and saved again gives the same
``graph.nnef`` text, ``graph.quant`` and tensor files, byte for byte. Other writers'
tract-dialect and Khronos NNEF is read when every operation it calls is one t2n knows
(the standard ones and tract's, ``t2n.backends.tract.reader``; an error lists those it
does not). Tensors stay on disk (memory-mapped, see
:mod:`t2n.backends.nnef.reader.tensors`) until they are read or copied into a new
artifact.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from t2n.artifact import Artifact
from t2n.backends.khronos.target import KhronosNNEF
from t2n.backends.nnef.reader.build import GraphBuilder, ReadFacts
from t2n.backends.nnef.reader.parser import parse_document
from t2n.backends.nnef.reader.statements import document_fragments
from t2n.backends.nnef.reader.tensors import ArtifactSource, open_artifact
from t2n.backends.nnef.renderer import RenderedModel
from t2n.backends.target import Target
from t2n.backends.tract.reader import tract_read_ops
from t2n.backends.tract.target import TractNNEF
from t2n.errors import InvalidArgumentError
from t2n.ir import Graph
from t2n.remodel.apply import Remodelled
from t2n.remodel.interface import Interface, graph_interface


@attrs.define(eq=False)
class NNEFModel:
    """An NNEF document read into the IR: ``graph`` (edit it with passes), the
    ``target`` it renders for (tract for tract-dialect documents, Khronos NNEF
    otherwise), and where it was read from."""

    graph: Graph
    target: Target
    path: Path | None = None
    facts: ReadFacts | None = None
    source: ArtifactSource | None = None
    history: list[Remodelled] = attrs.field(factory=list)
    """What each :meth:`remodel` did (passes, their stats, the interface before and after)."""

    @property
    def input_names(self) -> list[str]:
        return list(self.graph.info.input_names or [v.name for v in self.graph.inputs])

    @property
    def output_names(self) -> list[str]:
        return list(self.graph.info.output_names or [v.name for v in self.graph.outputs])

    def interface(self) -> Interface:
        """Inputs and outputs (names, dtypes, symbolic shapes), symbols and assertions."""
        return graph_interface(self.graph)

    def remodel(self, plan: Any, *, subnet: str | None = None, verify: bool = False) -> NNEFModel:
        """Apply a remodel plan (a :class:`~t2n.remodel.RemodelPlan`, a mapping, or the path
        of a YAML/JSON file; ``subnet`` picks one graph of a multi-graph plan) to the
        graph, in place; returns the model. ``verify`` checks the IR after every pass."""
        from t2n.remodel import apply_plan

        self.history.append(apply_plan(self.graph, plan, subnet=subnet, verify_each=verify))
        return self

    def render(self, target: Target | None = None) -> RenderedModel:
        """graph.nnef, graph.quant and the tensor list, for ``target`` (default: the model's)."""
        return (target or self.target).renderer().render(self.graph)

    def artifact(self, target: Target | None = None) -> Artifact:
        """The model as an :class:`~t2n.artifact.Artifact` (no PyTorch reference outputs:
        check it with ``check(inputs=..., expected=...)``). On Khronos NNEF, the target
        knows the document's fragments, so that ``check``/``run`` has the interpreter
        lower them."""
        t = target or self.target
        frags = {k: v for k, v in document_fragments(self.graph).items() if k not in t.fragments}
        if isinstance(t, KhronosNNEF) and frags:
            t = t.with_emitters(fragments=frags)
        rendered = self.render(t)
        return Artifact(ir=self.graph, target=t, rendered=rendered, input_names=list(rendered.input_ids),
                        output_names=list(rendered.output_ids), example_inputs=[], reference_outputs=[])

    def save(self, path: str | os.PathLike[str], compression_level: int | None = None, *,
             target: Target | None = None, overwrite: bool = False, progress: bool | None = None) -> Path:
        """Write the model as a folder, ``.tar`` or ``.tgz`` (by suffix or
        ``compression_level``), atomically, as :meth:`Artifact.save` does."""
        return self.artifact(target).save(path, compression_level, overwrite=overwrite, progress=progress)

    def run(self, inputs: Sequence[np.ndarray], *, symbols: Mapping[str, int] | None = None,
            target: Target | None = None) -> list[np.ndarray]:
        """The outputs of the model on ``inputs`` in the target's engine (in a child process)."""
        art = self.artifact(target)
        with tempfile.TemporaryDirectory(prefix="t2n-run-") as tmp:
            path = art.save(Path(tmp) / "model")
            return art.target.run(path, [np.asarray(x) for x in inputs], registries=art.rendered.registries,
                                  symbols=symbols)


def read(path: str | os.PathLike[str], target: Target | None = None) -> NNEFModel:
    """Read the NNEF artifact at ``path`` (a folder, ``.tar``, ``.tgz``, or a
    ``graph.nnef`` file) into the IR. ``target`` renders it again (default: ``TractNNEF()``
    for a tract-dialect document, ``KhronosNNEF()`` for a standard one).

    Raises ``NNEFSyntaxError`` for text that is not NNEF (naming the line),
    ``NNEFReadError`` listing every operation t2n does not know or naming a statement
    whose types do not fit, ``CorruptTensorFileError`` / ``CorruptArchiveError`` for a
    truncated or corrupt tensor or archive."""
    if target is not None and not isinstance(target, Target):
        raise InvalidArgumentError(f"target must be a t2n Target (TractNNEF(), KhronosNNEF()), got {target!r}")
    source = open_artifact(path)
    doc = parse_document(source.graph_nnef, f"{source.path}: graph.nnef")
    builder = GraphBuilder(doc, tract_read_ops(), _tensor_lookup(source), source.graph_quant, str(source.path))
    graph = builder.build()
    if target is None:
        target = TractNNEF() if builder.facts.dialect == "tract" else KhronosNNEF()
    return NNEFModel(graph, target, source.path, builder.facts, source)


def _tensor_lookup(source: ArtifactSource) -> Any:
    def get(label: str) -> Any:
        if label not in source.members:
            raise KeyError(label)
        return source.tensor(label)

    return get
