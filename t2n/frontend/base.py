"""What a frontend is: one way of reading a PyTorch model and lowering it to the IR.

``compile`` holds one :class:`Frontend` object (``frontend="jit"``:
:class:`~t2n.frontend.jit.frontend.JitFrontend`, ``"export"``:
:class:`~t2n.frontend.export.frontend.ExportFrontend`, or a user's own) and asks it, in
order, whether the model and the options suit it (:meth:`Frontend.check_options` before
anything runs, :meth:`Frontend.check_model` before the trace), to read the model
(:meth:`Frontend.read`) and to lower what it read (:meth:`Frontend.lower`). Nothing
else asks which frontend runs.

A frontend reads the compile's options through :class:`FrontendOptions`, the part of
:class:`t2n.options.CompileOptions` it needs.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol

import attrs
import torch

from t2n.backends.target import Target
from t2n.frontend.extractors import ModuleExtractor
from t2n.frontend.io import Spec
from t2n.frontend.registry import LoweringRegistry
from t2n.frontend.sampling import NoiseDraw
from t2n.frontend.specialization import Specialization
from t2n.ir import Graph, OpSet


class FrontendOptions(Protocol):
    """What a frontend reads of the compile's options (:class:`t2n.options.CompileOptions`)."""

    @property
    def target(self) -> Target: ...

    @property
    def kwargs(self) -> Mapping[str, Any] | None: ...

    @property
    def dynamic_axes(self) -> Mapping[str, Mapping[int, str]]: ...

    @property
    def dynamic_shapes(self) -> Any: ...

    @property
    def input_names(self) -> Sequence[str] | None: ...

    @property
    def extractors(self) -> Sequence[ModuleExtractor]: ...

    @property
    def weights_from(self) -> Any: ...

    @property
    def auto_harden_jit(self) -> bool: ...

    @property
    def jit_diagnostics(self) -> dict[str, Any] | None: ...

    @property
    def registry(self) -> LoweringRegistry: ...

    @property
    def op_set(self) -> OpSet | None: ...

    @property
    def strict_dynamic_axes(self) -> bool: ...

    @property
    def sampling(self) -> str: ...

    @property
    def strict(self) -> bool: ...


class TracedProgram(Protocol):
    """What the rest of ``compile`` reads of a model as a frontend read it (the jit
    frontend's ``TracedModel``, the export frontend's ``ExportedModel``)."""

    @property
    def example_inputs(self) -> list[torch.Tensor]: ...

    @property
    def reference_outputs(self) -> list[torch.Tensor]: ...

    @property
    def input_paths(self) -> list[str]: ...

    @property
    def output_paths(self) -> list[str]: ...

    @property
    def output_spec(self) -> Spec | None: ...

    @property
    def specializations(self) -> list[Specialization]: ...

    @property
    def state_read(self) -> dict[str, torch.Tensor]: ...

    noise: list[NoiseDraw]
    """With ``compile(sampling="inputs")``: the random draws that become graph inputs, in
    graph order, their values the last ``len(noise)`` of ``example_inputs`` (named when
    the model is read)."""


@attrs.frozen
class ReadModel:
    """A model as its frontend read it, and the names its graph will carry."""

    traced: TracedProgram
    request: Any
    """What the frontend asked of its reader for dynamic sizes (the export frontend's
    ``DynamicRequest``; ``None`` for the jit frontend), handed back to its :meth:`Frontend.lower`."""
    input_names: list[str]
    output_names: list[str]
    same: tuple[str, ...]
    """Output names that are also input names (outputs returning an input unchanged)."""
    axes: dict[str, dict[int, str]]
    """Input name → axis → symbol, in the normal form of :mod:`t2n.passes.dynamic_axes`."""
    specialized: list[str]
    """Where the trace kept a value computed from the inputs' data, one line each."""


class Frontend(abc.ABC):
    """One way of reading a model. Subclasses are small stateless objects."""

    name: ClassVar[str] = ""
    makes_axes_symbolic: ClassVar[bool] = False
    """The frontend's reader makes the dynamic axes symbolic itself (then the pipeline's
    ``dynamic-axes`` pass has nothing to do)."""

    def check_options(self, options: FrontendOptions) -> None:  # noqa: B027 (most frontends take every option)
        """Refuse options this frontend cannot honour (before anything runs)."""

    def check_model(self, model: object) -> None:  # noqa: B027
        """Refuse a model this frontend cannot read (before the trace)."""

    @abc.abstractmethod
    def read(self, model: Any, args: tuple[Any, ...], options: FrontendOptions) -> tuple[TracedProgram, Any]:
        """The model run on ``args`` as this frontend reads it, and the dynamic-size
        request it read it with (``ReadModel.request``)."""

    @abc.abstractmethod
    def lower(self, read: ReadModel, options: FrontendOptions) -> Graph:
        """The IR graph of what :meth:`read` gave, its inputs and outputs named
        ``read.input_names`` and ``read.output_names``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
