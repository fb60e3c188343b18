"""What the stages of a compile tell each other about a graph, as typed fields.

The frontend, the passes and the renderers read and write these fields by name;
mypy checks every use. None of them is part of the IR's structure: changing them is
not a graph edit (``Graph.edits`` does not count it) and the IR printer ignores them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from t2n.ir.nodes import SourceLoc, Value


@attrs.frozen
class BakedConstant:
    """A value the frontend had to use as a constant although the model computed it
    (perhaps from a size): if a dynamic axis makes it symbolic, the trace baked it in."""

    value: Value
    loc: SourceLoc
    what: str


@attrs.define
class GraphInfo:
    """The facts about a graph that outlive the stage that found them.

    ``input_names``/``output_names``: the names the artifact reports (None: the values'
    own); ``properties``: written to tract's properties fragment; ``custom_extensions``:
    extra ``extension`` lines; ``specializations`` and ``tracer_warnings``: what the
    trace reported; ``aten_ops``: how many nodes of each aten op were lowered;
    ``baked_constants``: see :class:`BakedConstant`; ``symbols``: each dynamic-axes
    symbol's traced size; ``baked_sizes``: the baked sizes dynamic axes reported.
    """

    input_names: tuple[str, ...] | None = None
    output_names: tuple[str, ...] | None = None
    properties: dict[str, str] = attrs.field(factory=dict)
    custom_extensions: list[str] = attrs.field(factory=list)
    specializations: list[str] = attrs.field(factory=list)
    tracer_warnings: list[str] = attrs.field(factory=list)
    aten_ops: dict[str, int] = attrs.field(factory=dict)
    baked_constants: list[BakedConstant] = attrs.field(factory=list)
    symbols: dict[str, int] = attrs.field(factory=dict)
    baked_sizes: list[str] = attrs.field(factory=list)
    naming_scheme: str = "natural_verbose"
    """How graph.nnef names tensors (see :mod:`t2n.backends.nnef.naming`)."""
    traced_names: dict[Value, str] = attrs.field(factory=dict)
    """The TorchScript debug name of the values the trace named (the ``raw`` scheme)."""
    same_io_names: tuple[str, ...] = ()
    """Names that are both an input and an output (the output is that input)."""
    input_shapes_from: dict[str, Value] = attrs.field(factory=dict)
    """Inputs whose shape is that of a 1-D size value computed in the graph (random draws
    made inputs, ``compile(sampling="inputs")``), by name: the dynamic-axes pass gives
    each the symbolic sizes of its value, unless ``dynamic_axes`` names it."""
    size_conversions: list[str] = attrs.field(factory=list)
    """Where the trace turned a dynamic input size into a Python value (``min(x.shape[1],
    8)``): reported with the baked sizes by the dynamic-axes pass."""
