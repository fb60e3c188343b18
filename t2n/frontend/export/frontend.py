"""The torch.export frontend (``frontend="export"``): the model exported by
``torch.export`` (or an ``ExportedProgram`` given by the user), decomposed to core ATen,
with the dynamic sizes asked of torch.export itself; lowered node by node
(:mod:`t2n.frontend.export.lower`)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from t2n.errors import InvalidArgumentError
from t2n.frontend.base import Frontend, FrontendOptions, ReadModel, TracedProgram
from t2n.frontend.export.lower import lower_program
from t2n.frontend.export.program import ExportedModel, export_program, is_exported_program
from t2n.frontend.export.refusals import refuse_scripted
from t2n.frontend.export.requests import export_request
from t2n.frontend.export.shapes import lowering_shapes
from t2n.ir import Graph


class ExportFrontend(Frontend):
    """``torch.export.export(strict=False)``, then ``run_decompositions()``."""

    name: ClassVar[str] = "export"
    makes_axes_symbolic: ClassVar[bool] = True

    def check_options(self, options: FrontendOptions) -> None:
        if options.extractors:
            raise InvalidArgumentError(
                "extractors= apply to the jit frontend (they replace a traced module call); use "
                "frontend=\"jit\" with extractors, or register lowering rules for the ops instead")

    def check_model(self, model: object) -> None:
        refuse_scripted(model)
        if not isinstance(model, torch.nn.Module) and not is_exported_program(model):
            raise InvalidArgumentError(
                f"model must be a torch.nn.Module or a torch.export.ExportedProgram, got {type(model).__name__}")

    def read(self, model: Any, args: tuple[Any, ...], options: FrontendOptions) -> tuple[TracedProgram, Any]:
        request = export_request(model, args, options.kwargs, options.input_names, options.dynamic_axes,
                                 options.dynamic_shapes)
        exported = export_program(model, args, options.kwargs, dynamic_shapes=request,
                                  weights_from=options.weights_from, draws=options.sampling == "inputs")
        return exported, request

    def lower(self, read: ReadModel, options: FrontendOptions) -> Graph:
        assert isinstance(read.traced, ExportedModel)
        shapes = lowering_shapes(read.traced, read.input_names, read.request, strict=options.strict_dynamic_axes)
        return lower_program(read.traced, options.registry, read.input_names, read.output_names,
                             op_set=options.op_set, native_ops=options.target.native_ops(),
                             sampling=options.sampling, **shapes)
