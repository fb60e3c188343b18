"""The torch.export frontend: a model exported by ``torch.export`` (or an
``ExportedProgram`` given by the user), decomposed to core ATen and lowered into the
same IR as the jit frontend, with the same lowering rules where the aten names agree.

``compile(..., frontend="export")`` uses it; see :mod:`.program` (obtaining the
program), :mod:`.kept_ops` (ops not decomposed), :mod:`.lower` (the driver) and
:mod:`.context` (what a rule sees of an FX node).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from t2n.errors import InvalidArgumentError

FRONTENDS = ("jit", "export")


def check_frontend(frontend: object, model: object, extractors: Sequence[Any] | None) -> str:
    """``frontend`` if it is one t2n has and suits ``model`` and the options, else an
    ``InvalidArgumentError`` saying what to pass instead."""
    import torch

    from t2n.frontend.export.program import is_exported_program

    if frontend not in FRONTENDS:
        raise InvalidArgumentError(f"frontend must be one of {', '.join(map(repr, FRONTENDS))}, got {frontend!r}")
    if frontend == "jit":
        if is_exported_program(model):
            raise InvalidArgumentError(
                "model is a torch.export.ExportedProgram, which the jit frontend cannot read; "
                "pass frontend=\"export\" (or the nn.Module itself)")
        return "jit"
    from t2n.frontend.export.refusals import refuse_scripted

    refuse_scripted(model)
    if extractors:
        raise InvalidArgumentError(
            "extractors= apply to the jit frontend (they replace a traced module call); use "
            "frontend=\"jit\" with extractors, or register lowering rules for the ops instead")
    if not isinstance(model, torch.nn.Module) and not is_exported_program(model):
        raise InvalidArgumentError(
            f"model must be a torch.nn.Module or a torch.export.ExportedProgram, got {type(model).__name__}")
    return "export"


def obtain_program(model: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None, *,
                   weights_from: Any = None, dynamic_shapes: Any = None) -> Any:
    """The program ``compile`` lowers, as an :class:`~.program.ExportedModel`."""
    from t2n.frontend.export.program import export_program

    return export_program(model, args, kwargs, dynamic_shapes=dynamic_shapes, weights_from=weights_from)
