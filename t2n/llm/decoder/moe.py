"""What an LLM export adds for the experts of a mixture-of-experts model: the 4-bit
weights a Q4_0 recipe may quantize among them (the extractors themselves, and the
experts implementation traced for the others, are the frontend's:
:mod:`t2n.frontend.transformers_experts`, used by every ``t2n.compile``)."""

from __future__ import annotations

import contextlib

import attrs
import torch

from t2n.frontend.extractors import ModuleExtractor
from t2n.frontend.transformers_experts import (
    experts_form,
    is_experts_module,
    moe_extractors,
    traceable_experts,
)


@attrs.frozen
class MoeExport:
    """What an LLM export of ``model`` adds for its experts: the extractors that write
    them as ``moe_experts`` (the target's passes then write that op in its own form:
    tract's ``tract_moe_ffn`` or standard operations), and the experts implementation
    to trace the others with."""

    model: torch.nn.Module
    extractors: list[ModuleExtractor]

    @classmethod
    def of(cls, model: torch.nn.Module) -> MoeExport:
        if not any(is_experts_module(m) for m in model.modules()):
            return cls(model, [])
        return cls(model, moe_extractors(model))

    def q4_0_weights(self) -> list[str]:
        """The expert weights a Q4_0 recipe quantizes with the linear layers: those tract's
        operator runs on 4-bit blocks (``[E, out, in]`` experts without biases)."""
        types = tuple(e.module_type for e in self.extractors)
        out = []
        for path, module in self.model.named_modules():
            form = experts_form(module) if isinstance(module, types) else None
            if form is not None and not form.transposed and not form.has_bias and form.act_limit is None:
                out += [f"{path}.gate_up_proj" if path else "gate_up_proj", f"{path}.down_proj" if path else "down_proj"]
        return out

    def tracing(self) -> contextlib.AbstractContextManager[None]:
        return traceable_experts(self.model)


__all__ = ["MoeExport"]
